"""Base classes and the JSON Schema generator shared by every document kind.

The pydantic models in this package are the single source of the schemas in
``spec/v1/schemas``: ``mibspec schema export`` writes them, and a test fails when
the committed files differ from what the models generate.
"""

from __future__ import annotations

from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from mibspec.core.spec import SPEC_VERSION

__all__ = [
    "CURRENT_VERSION",
    "SPEC_VERSION",
    "TAGS",
    "Closed",
    "SchemaGenerator",
    "SpecVersion",
    "schema_id",
    "versions_from",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: The spec versions a document may declare: 1.2 and the 1.1 and 1.0 it extends (same schema folder).
SpecVersion = Literal["1.0", "1.1", "1.2"]
assert SPEC_VERSION in get_args(SpecVersion)


def versions_from(version: str) -> tuple[str, ...]:
    """The spec versions a document may declare from ``version`` on (``"1.1"``: 1.1 and 1.2)."""
    known: tuple[str, ...] = get_args(SpecVersion)
    return known[known.index(version) :]


#: The version a document built from a model declares.
CURRENT_VERSION = cast(SpecVersion, SPEC_VERSION)

#: The fields that say what a document is. Their defaults (the current spec version, the
#: model's kind and track) are filled in when a document is built from its model and always
#: written; in the schemas they stay required and carry no default.
TAGS = ("spec_version", "kind", "track")


def schema_id(name: str, version: str = SPEC_VERSION) -> str:
    """The ``$id`` of a schema: a URN carrying the spec version."""
    return f"urn:mibspec:schema:{name}:{version}"


class Closed(BaseModel):
    """A JSON object that admits only the properties it declares."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SchemaGenerator(GenerateJsonSchema):
    """Emits portable draft 2020-12 schemas.

    - optional fields (default ``None``) are omitted rather than nullable: documents
      never carry ``null`` for an absent value; required nullable fields stay nullable;
    - tagged unions become ``if``/``then`` chains on the tag, so a validator reports
      the errors of the branch the document chose instead of "matches none of oneOf";
    - dictionaries with constrained keys use ``propertyNames`` (pydantic's default,
      ``patternProperties`` alone, would let any other key through);
    - no auto-generated titles.
    """

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        inner = schema["schema"]
        if schema.get("default", ...) is None and inner["type"] == "nullable":
            # An optional field: absent when unknown, never null.
            return self.generate_inner(inner["schema"])
        return super().default_schema(schema)

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        generated = super().model_schema(schema)
        generated.pop("title", None)
        properties = generated.get("properties", {})
        tags = [name for name in TAGS if "default" in properties.get(name, {})]
        if tags:
            # A document's tags default only for whoever builds one; a document must state them.
            for name in tags:
                del properties[name]["default"]
            required = set(generated.get("required", [])) | set(tags)
            generated["required"] = [name for name in properties if name in required]
        return generated

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        generated = super().dict_schema(schema)
        patterns = generated.pop("patternProperties", None)
        if patterns:
            # Constrain the keys themselves; every value follows the value schema.
            [(pattern, values)] = patterns.items()
            generated["propertyNames"] = {"pattern": pattern}
            generated["additionalProperties"] = values
        return generated

    def tagged_union_schema(self, schema: core_schema.TaggedUnionSchema) -> JsonSchemaValue:
        tag = schema["discriminator"]
        if not isinstance(tag, str):  # pragma: no cover - only plain string tags are used
            return super().tagged_union_schema(schema)
        branches = []
        for value, choice in schema["choices"].items():
            branches.append(
                {
                    "if": {"properties": {tag: {"const": value}}, "required": [tag]},
                    "then": self.generate_inner(choice),
                }
            )
        return {
            "type": "object",
            "required": [tag],
            "properties": {tag: {"enum": list(schema["choices"])}},
            "allOf": branches,
        }
