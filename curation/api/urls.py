from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from curation.api import views
from curation.api.exports import ExportDetail, ExportFile, ProjectExports

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("token/", views.ObtainToken.as_view(), name="api-token"),
    path("projects/", views.ProjectList.as_view(), name="api-project-list"),
    path("projects/<slug:slug>/", views.ProjectDetail.as_view(), name="api-project-detail"),
    path("projects/<slug:slug>/import/", views.ProjectImport.as_view(), name="api-project-import"),
    path("import-jobs/<int:pk>/", views.ImportJobDetail.as_view(), name="api-import-job-detail"),
    path("projects/<slug:slug>/exports/", ProjectExports.as_view(), name="api-project-exports"),
    path("exports/<int:pk>/", ExportDetail.as_view(), name="api-export-detail"),
    path("exports/<int:pk>/files/<str:name>", ExportFile.as_view(), name="api-export-file"),
    path("tasks/", views.TaskList.as_view(), name="api-task-list"),
    path("tasks/<int:pk>/", views.TaskDetail.as_view(), name="api-task-detail"),
    path("trajectories/", views.TrajectoryList.as_view(), name="api-trajectory-list"),
    path("trajectories/<int:pk>/", views.TrajectoryDetail.as_view(), name="api-trajectory-detail"),
]
