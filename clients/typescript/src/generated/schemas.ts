// Generated from schemas/internal.event.v2.schema.json by scripts/generate-types.mjs (npm run types): do not edit.
export const internalEventV2Schema = {
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://llm-bot.invalid/schemas/internal.event.v2.schema.json",
  "$defs": {
    "Annotation": {
      "description": "An annotation of the event; those of kind ``prompt`` form the user message.",
      "properties": {
        "kind": {
          "maxLength": 64,
          "minLength": 1,
          "title": "Kind",
          "type": "string"
        },
        "text": {
          "default": "",
          "title": "Text",
          "type": "string"
        },
        "lang": {
          "anyOf": [
            {
              "maxLength": 35,
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Lang"
        }
      },
      "required": [
        "kind"
      ],
      "title": "Annotation",
      "type": "object"
    },
    "EventSource": {
      "description": "Where the event came from (informational).",
      "properties": {
        "platform": {
          "anyOf": [
            {
              "maxLength": 64,
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Platform"
        },
        "channel": {
          "anyOf": [
            {
              "maxLength": 64,
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Channel"
        }
      },
      "title": "EventSource",
      "type": "object"
    },
    "FunctionDefinition": {
      "properties": {
        "name": {
          "pattern": "^[A-Za-z0-9_-]{1,64}$",
          "title": "Name",
          "type": "string"
        },
        "description": {
          "anyOf": [
            {
              "maxLength": 4096,
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Description"
        },
        "parameters": {
          "anyOf": [
            {
              "additionalProperties": true,
              "type": "object"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "JSON Schema of the arguments (an object schema).",
          "title": "Parameters"
        },
        "strict": {
          "anyOf": [
            {
              "type": "boolean"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Strict"
        }
      },
      "required": [
        "name"
      ],
      "title": "FunctionDefinition",
      "type": "object"
    },
    "ToolDefinition": {
      "description": "An OpenAI function tool definition, as Chat Completions takes it.",
      "properties": {
        "type": {
          "const": "function",
          "default": "function",
          "title": "Type",
          "type": "string"
        },
        "function": {
          "$ref": "#/$defs/FunctionDefinition"
        }
      },
      "required": [
        "function"
      ],
      "title": "ToolDefinition",
      "type": "object"
    },
    "ToolTrace": {
      "description": "Payload of ``tool.call`` and ``tool.result`` events.",
      "properties": {
        "tool_call_id": {
          "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
          "title": "Tool Call Id",
          "type": "string"
        },
        "name": {
          "anyOf": [
            {
              "maxLength": 128,
              "minLength": 1,
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Name"
        },
        "arguments": {
          "default": "{}",
          "title": "Arguments",
          "type": "string"
        },
        "content": {
          "default": "",
          "title": "Content",
          "type": "string"
        }
      },
      "required": [
        "tool_call_id"
      ],
      "title": "ToolTrace",
      "type": "object"
    },
    "TranscriptMessage": {
      "description": "One message of a ``transcript`` event: something already said, imported as it was.",
      "properties": {
        "role": {
          "enum": [
            "user",
            "assistant"
          ],
          "title": "Role",
          "type": "string"
        },
        "text": {
          "description": "What was said (not blank; the body limit bounds its length).",
          "minLength": 1,
          "pattern": "\\S",
          "title": "Text",
          "type": "string"
        },
        "name": {
          "anyOf": [
            {
              "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]{1,64}$",
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "The speaker's display name (at most 64 characters).",
          "title": "Name"
        },
        "created_at": {
          "anyOf": [
            {
              "format": "date-time",
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "When it was said (RFC 3339); the event's created_at by default.",
          "title": "Created At"
        }
      },
      "required": [
        "role",
        "text"
      ],
      "title": "TranscriptMessage",
      "type": "object"
    }
  },
  "description": "A chat event published to the ingress routing key.",
  "properties": {
    "schema": {
      "description": "'internal.event.v2' (a minor suffix such as '.1' is accepted)",
      "pattern": "^internal\\.event\\.v2(\\.[0-9]+)?$",
      "title": "Schema",
      "type": "string"
    },
    "id": {
      "description": "Unique per event; the idempotency key.",
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
      "title": "Id",
      "type": "string"
    },
    "type": {
      "enum": [
        "message",
        "transcript",
        "conversation.end",
        "memory.forget",
        "tool.call",
        "tool.result"
      ],
      "title": "Type",
      "type": "string"
    },
    "tenant_id": {
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
      "title": "Tenant Id",
      "type": "string"
    },
    "user_id": {
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
      "title": "User Id",
      "type": "string"
    },
    "conversation_id": {
      "description": "Conversation id; '*' only with type memory.forget (all conversations).",
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$|^\\*$",
      "title": "Conversation Id",
      "type": "string"
    },
    "created_at": {
      "format": "date-time",
      "title": "Created At",
      "type": "string"
    },
    "source": {
      "anyOf": [
        {
          "$ref": "#/$defs/EventSource"
        },
        {
          "type": "null"
        }
      ],
      "default": null
    },
    "annotations": {
      "items": {
        "$ref": "#/$defs/Annotation"
      },
      "maxItems": 256,
      "title": "Annotations",
      "type": "array"
    },
    "metadata": {
      "additionalProperties": {
        "anyOf": [
          {
            "maxLength": 1024,
            "type": "string"
          },
          {
            "type": "integer"
          },
          {
            "type": "number"
          },
          {
            "type": "boolean"
          },
          {
            "type": "null"
          }
        ]
      },
      "maxProperties": 64,
      "propertyNames": {
        "maxLength": 64,
        "minLength": 1
      },
      "title": "Metadata",
      "type": "object"
    },
    "tool": {
      "anyOf": [
        {
          "$ref": "#/$defs/ToolTrace"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "Required for tool.call and tool.result events."
    },
    "tools": {
      "anyOf": [
        {
          "items": {
            "$ref": "#/$defs/ToolDefinition"
          },
          "maxItems": 64,
          "type": "array"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "Functions the model may call for this message (OpenAI function definitions, names unique); its calls come back as a tool_call candidate.",
      "title": "Tools"
    },
    "transcript": {
      "anyOf": [
        {
          "items": {
            "$ref": "#/$defs/TranscriptMessage"
          },
          "maxItems": 500,
          "minItems": 1,
          "type": "array"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "Required for transcript events: the messages to record, in order (larger histories: several events, published in order).",
      "title": "Transcript"
    }
  },
  "required": [
    "schema",
    "id",
    "type",
    "tenant_id",
    "user_id",
    "conversation_id",
    "created_at"
  ],
  "title": "InternalEventV2",
  "type": "object"
} as const;
