from annotate.views import (
    adjudication,
    agreement,
    annotation,
    lists,
    project_settings,
    queues,
    review,
)

urlpatterns = [
    *lists.urls,
    *review.urls,
    *annotation.urls,
    *queues.urls,
    *adjudication.urls,
    *agreement.urls,
    *project_settings.urls,
]
