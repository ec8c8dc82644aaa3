from workers.views import corrections, critic, evaluation, judges

urlpatterns = [*evaluation.urls, *judges.urls, *corrections.urls, *critic.urls]
