from django.urls import path

from annotate import views

urlpatterns = [
    path("p/<slug:slug>/", views.project_detail, name="project-detail"),
    path("t/<int:pk>/", views.trajectory_detail, name="trajectory-detail"),
]
