"""Checks a real HTTP answer against an OpenAPI 3.1 document: the status is
declared for the operation, the declared required headers are present and fit
their schemas, and the body fits the schema of its content type."""
import json

from jsonschema import Draft202012Validator


def resolve(spec, obj):
    while "$ref" in obj:
        node = spec
        for part in obj["$ref"].removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
    return obj


def schema_validator(spec, schema):
    # The schema's $refs point into the document: make the document the root.
    return Draft202012Validator({**spec, **schema})


def check_against_spec(spec, template, method, answer):
    """answer: (status, headers with lower-case names, body bytes). Returns the
    parsed body, or None where the document declares no content."""
    status, headers, body = answer
    responses = spec["paths"][template][method.lower()]["responses"]
    assert str(status) in responses, f"{method} {template} answered {status}, which the document does not declare"
    response = resolve(spec, responses[str(status)])
    for name, header in response.get("headers", {}).items():
        header = resolve(spec, header)
        value = headers.get(name.lower())
        if header.get("required"):
            assert value is not None, f"{method} {template} {status} lacks the {name} header"
        if value is not None:
            instance = int(value) if header["schema"].get("type") == "integer" else value
            schema_validator(spec, header["schema"]).validate(instance)
    content = response.get("content")
    if not content or method == "HEAD":
        assert body == b""
        return None
    media_type = headers["content-type"].split(";")[0]
    assert media_type in content, f"{method} {template} {status} sent {media_type}"
    document = json.loads(body)
    schema_validator(spec, content[media_type]["schema"]).validate(document)
    return document
