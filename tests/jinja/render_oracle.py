#!/usr/bin/env python3
"""Reference renderer for chat templates: Python Jinja2 configured as Hugging Face
transformers configures it in apply_chat_template (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loop controls, {% generation %}, a tojson filter that is
json.dumps(ensure_ascii=False, ...), raise_exception and strftime_now globals).

    render_oracle.py TEMPLATE_FILE CONV.json   -> rendered text on stdout (exit 0),
                                                  or the Jinja2 error on stderr (exit 3)

CONV.json: {"messages": [...], "tools": [...], "add_generation_prompt": bool,
            "bos_token": str, "eos_token": str, "kwargs": {...}}
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %} renders its body (transformers' AssistantTracker
    also records the character span, which does not change the text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def compile_template(template_source):
    return make_environment().from_string(template_source)


def render(template_source, conv):
    """Renders like transformers: messages, tools, documents, add_generation_prompt, then the
    special tokens and extra keyword arguments. `template_source` may be a compiled template."""
    template = template_source
    if isinstance(template_source, str):
        template = compile_template(template_source)
    kwargs = {}
    for key in ("bos_token", "eos_token"):
        if key in conv:
            kwargs[key] = conv[key]
    kwargs.update(conv.get("kwargs", {}))
    rendered = template.render(messages=conv.get("messages", []), tools=conv.get("tools"),
                               documents=None,
                               add_generation_prompt=conv.get("add_generation_prompt", False),
                               **kwargs)
    if conv.get("continue_final_message"):
        rendered = continue_final_message(rendered, conv)
    return rendered


def continue_final_message(rendered, conv):
    """transformers' apply_chat_template(continue_final_message=True) post-processing."""
    if conv.get("add_generation_prompt"):
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    final_message = conv["messages"][-1]["content"]
    if isinstance(final_message, (list, tuple)):
        for block in reversed(final_message):
            if "text" in block:
                final_message = block["text"]
                break
        else:
            raise ValueError("no text to continue in the final message")
    if final_message.strip() not in rendered:
        raise ValueError("the final message does not appear in the rendered chat")
    loc = rendered.rindex(final_message.strip())
    if rendered[loc: loc + len(final_message.lstrip())] == final_message:
        return rendered[: loc + len(final_message.lstrip())]
    return rendered[: loc + len(final_message.strip())]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8", newline="") as f:
        source = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        conv = json.load(f)
    try:
        text = render(source, conv)
    except Exception as e:  # Jinja2 and Python errors alike: the template raised
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 3
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
