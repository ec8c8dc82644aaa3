from django.urls import path

from curation import views

urlpatterns = [
    path("", views.project_list, name="project-list"),
]
