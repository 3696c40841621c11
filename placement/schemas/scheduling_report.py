"""JSON schema of the scheduling report extension.

The report body is the scheduler's to shape; only the envelope is checked:
the owning project (so a project reader sees only its own reports) and an
object-valued report.
"""

PUT_REPORT = {
    "type": "object",
    "properties": {
        "project_id": {
            "anyOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]
        },
        "report": {"type": "object"},
    },
    "required": ["report"],
    "additionalProperties": False,
}

# A report holds counts and the top few weights, not every host; this bound
# keeps one misbehaving writer from filling the database.
MAX_REPORT_BYTES = 1024 * 1024

# POST /scheduling_reports: several reports in one write, all or none.
MAX_REPORTS_PER_CALL = 1000

POST_REPORTS = {
    "type": "object",
    "properties": {
        "reports": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_REPORTS_PER_CALL,
            "items": {
                "type": "object",
                "properties": {
                    "request_id": {"type": "string", "minLength": 1, "maxLength": 255},
                    **PUT_REPORT["properties"],
                },
                "required": ["request_id", "report"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["reports"],
    "additionalProperties": False,
}
