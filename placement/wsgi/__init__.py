"""WSGI entry points for servers that import the application (uwsgi, mod_wsgi)."""
