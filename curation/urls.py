from django.urls import path

from curation import views
from curation.export_views import export_detail, export_file, export_rerun, exports

urlpatterns = [
    path("", views.project_list, name="project-list"),
    path("p/<slug:slug>/import/", views.import_runs, name="import-runs"),
    path("imports/<int:pk>/", views.import_job, name="import-job"),
    path("p/<slug:slug>/exports/", exports, name="dataset-exports"),
    path("exports/<int:pk>/", export_detail, name="dataset-export"),
    path("exports/<int:pk>/rerun/", export_rerun, name="dataset-export-rerun"),
    path("exports/<int:pk>/files/<str:name>", export_file, name="dataset-export-file"),
]
