from django.urls import path

from curation import views

urlpatterns = [
    path("", views.project_list, name="project-list"),
    path("p/<slug:slug>/import/", views.import_runs, name="import-runs"),
    path("imports/<int:pk>/", views.import_job, name="import-job"),
]
