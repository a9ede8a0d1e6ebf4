from django.contrib import admin
from django.urls import path

from testproject.shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("signup/", views.signup, name="signup"),
]
