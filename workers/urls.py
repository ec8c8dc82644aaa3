from workers.views import evaluation, judges

urlpatterns = [*evaluation.urls, *judges.urls]
