"""x-openstack-request-id on every response, including those made outside Flask.

Outermost WSGI layer (as upstream's request_id middleware): a 401 from
keystonemiddleware or a CORS answer carries the id too. The Flask app reads
the same id from the environ so error bodies and logs agree with the header.
"""

import uuid

ENVIRON_KEY = "placement.request_id"
HEADER = "x-openstack-request-id"


def new_id():
    return "req-" + str(uuid.uuid4())


class RequestIdMiddleware:
    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        request_id = environ.setdefault(ENVIRON_KEY, new_id())

        def _start_response(status, headers, exc_info=None):
            if not any(name.lower() == HEADER for name, _value in headers):
                headers = list(headers) + [(HEADER, request_id)]
            return start_response(status, headers, exc_info)

        return self.application(environ, _start_response)
