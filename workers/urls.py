from workers.views import corrections, evaluation, judges

urlpatterns = [*evaluation.urls, *judges.urls, *corrections.urls]
