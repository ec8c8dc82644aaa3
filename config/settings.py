"""Settings, all read from the environment; the defaults run on one machine with nothing installed.

DATABASE_URL       default: SQLite file var/db.sqlite3
CELERY_BROKER_URL  default: "filesystem://", kombu's embedded broker under var/broker/
SECRET_KEY, DEBUG, ALLOWED_HOSTS
"""

import json
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DEBUG", False)
# The default only suits one machine; `manage.py check --deploy` flags it in production.
SECRET_KEY = os.environ.get("SECRET_KEY", "django-insecure-local-key-set-SECRET_KEY-in-production")
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_celery_beat",
    "curation",
    "annotate",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.security.ContentSecurityPolicyMiddleware",
]

# Security headers (config/security.py adds the CSP; Django's middleware the rest).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# HTTPS=1 where the site is served over TLS: secure-only cookies, redirects to https and HSTS.
# Behind a TLS-terminating proxy, also set TRUST_X_FORWARDED_PROTO=1 (the proxy must set it).
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0))
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))

# Uploads larger than this are streamed to a temporary file instead of held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", 200 * 1024 * 1024))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "curation.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "curation.api.pagination.IdCursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # `?format=` names the import format (as --format does), not a renderer.
    "URL_FORMAT_OVERRIDE": None,
    # Requests per client in a window; over it the API answers 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "config.security.AnonApiThrottle",
        "config.security.UserApiThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("API_THROTTLE_ANON", "100/minute"),
        "user": os.environ.get("API_THROTTLE_USER", "2000/minute"),
    },
}
# Failed logins from one address, or for one username, before the login page refuses (429)
# for the rest of the window. Counted in the cache, like the API throttles.
LOGIN_MAX_FAILURES = int(os.environ.get("LOGIN_MAX_FAILURES", 10))
LOGIN_FAILURE_WINDOW_S = int(os.environ.get("LOGIN_FAILURE_WINDOW_S", 300))
# Throttle and login-failure counters. The default cache is per process; with several web
# processes (gunicorn workers) set CACHE_URL=redis://HOST:PORT/DB so they count together.
CACHE_URL = os.environ.get("CACHE_URL", "")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Trajectory curation studio API",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # What Django's path converters match, so a client (or the fuzz test) builds only paths
    # that reach a view: any other answers Django's HTML 404, not the API's.
    "PATH_CONVERTER_OVERRIDES": {
        "int": {"type": "integer", "minimum": 0},
        "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
        "str": {"type": "string", "pattern": "^[^/]+$"},
    },
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
# Kombu transport options as JSON, e.g. Redis's {"visibility_timeout": 3600}: how long before
# an unacknowledged task (its worker died) goes to another worker.
CELERY_BROKER_TRANSPORT_OPTIONS: dict = json.loads(
    os.environ.get("CELERY_BROKER_TRANSPORT_OPTIONS", "{}")
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    BROKER_DIR = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    for folder in ("queue", "control"):
        (BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# The reconciler (workers/reconcile.py, every minute under beat) sends again work queued for
# longer than RECONCILE_QUEUED_S (its message was lost) or running for longer than
# RECONCILE_STALE_S (its worker died).
RECONCILE_QUEUED_S = int(os.environ.get("RECONCILE_QUEUED_S", 300))
RECONCILE_STALE_S = int(os.environ.get("RECONCILE_STALE_S", 3600))
CELERY_BEAT_SCHEDULE = {
    "reconcile": {"task": "workers.reconcile", "schedule": 60.0, "options": {"queue": "default"}}
}

# Judging: trajectories per Celery task (one backend call per strategy round for all of them).
JUDGE_BATCH_SIZE = int(os.environ.get("JUDGE_BATCH_SIZE", 16))

# Import batches: trajectories written per transaction on the fast path.
IMPORT_BATCH_SIZE = int(os.environ.get("IMPORT_BATCH_SIZE", 500))
# A record over either limit is refused like any bad record; the rest of its file lands.
IMPORT_MAX_STEPS = int(os.environ.get("IMPORT_MAX_STEPS", 10_000))
IMPORT_MAX_STEP_CHARS = int(os.environ.get("IMPORT_MAX_STEP_CHARS", 2_000_000))
# Bytes per API import body (413 beyond it) and per file uploaded on the import page.
IMPORT_MAX_REQUEST_BYTES = int(os.environ.get("IMPORT_MAX_REQUEST_BYTES", 1024**3))
IMPORT_MAX_UPLOAD_BYTES = int(os.environ.get("IMPORT_MAX_UPLOAD_BYTES", 1024**3))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}

# Dataset exports (curation/exports/) are written to the "exports" storage, under exports/.
# By default that is a folder under MEDIA_ROOT. EXPORTS_STORAGE_BACKEND and
# EXPORTS_STORAGE_OPTIONS ("key=value,key=value") plug in another backend, e.g. for any
# S3-compatible store: "storages.backends.s3.S3Storage" (django-storages) with
# "bucket_name=datasets,endpoint_url=https://s3.example.com".
EXPORTS_STORAGE_OPTIONS = dict(
    pair.split("=", 1) for pair in os.environ.get("EXPORTS_STORAGE_OPTIONS", "").split(",") if pair
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "exports": {
        "BACKEND": os.environ.get(
            "EXPORTS_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"
        ),
        "OPTIONS": EXPORTS_STORAGE_OPTIONS,
    },
}
