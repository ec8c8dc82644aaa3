from workers.views import corrections, critic, evaluation, judges, teachers

urlpatterns = [*evaluation.urls, *judges.urls, *corrections.urls, *teachers.urls, *critic.urls]
