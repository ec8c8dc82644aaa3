from workers.views import judges

urlpatterns = [*judges.urls]
