from annotate.views import adjudication, agreement, annotation, lists, queues, review

urlpatterns = [
    *lists.urls,
    *review.urls,
    *annotation.urls,
    *queues.urls,
    *adjudication.urls,
    *agreement.urls,
]
