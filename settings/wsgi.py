"""The WSGI application that every server serves: any WSGI server (`settings.wsgi:application`)
and `manage.py runserver`, which loads it in its serving process — the autoreloader's child,
or the only process with `--noreload`.

[G2] Creating the application starts the in-process learning worker and its recovery pass
(where OPENBOT_INPROCESS_WORKER is set), so runs that were waiting when the server last
stopped are learned at once, not at the first new turn. Management commands that do not serve
(migrate, shell, check, …) never load this module, so they never start a worker. This module
is the top of the house: it may import every app.
"""

import os

from django.core.wsgi import get_wsgi_application

from memorybot.worker import ensure_inprocess_worker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.dev")
application = get_wsgi_application()
ensure_inprocess_worker()
