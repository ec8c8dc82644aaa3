from django.urls import URLPattern

urls: list[URLPattern] = []
