"""A griffe extension for the API reference: the docstrings' reStructuredText roles, read as Markdown.

qwkboost's numpydoc docstrings use Sphinx roles (``:math:`...```, ``:class:`~qwkboost...```) and ``.. math::``
blocks; mkdocstrings renders docstrings as Markdown, where those would show literally. This turns math into
MathJax (``$...$``, ``$$...$$``), cross-reference roles into code spans, and RST double back-quotes into
Markdown code.
"""

from __future__ import annotations

import re
import textwrap

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|py:\w+):`~?([^`]+)`")
MATH = re.compile(r":math:`([^`]+)`")
LITERAL = re.compile(r"``([^`]+)``")
BLOCK = re.compile(r"^( *)\.\. math::[ \t]*(.*)\n((?:\1[ \t]+.*\n|[ \t]*\n)*)", re.M)


def _block(m: re.Match) -> str:
    indent, first, body = m.group(1), m.group(2), m.group(3)
    text = textwrap.dedent(first + "\n" + body) if first else textwrap.dedent(body)
    return f"{indent}$$\n{textwrap.indent(text.strip(), indent)}\n{indent}$$\n\n"


def convert(text: str) -> str:
    text = BLOCK.sub(_block, text if text.endswith("\n") else text + "\n")
    text = MATH.sub(lambda m: f"${m.group(1)}$", text)
    text = ROLE.sub(lambda m: f"`{m.group(1).split('.')[-1] if m.group(0).count('~') else m.group(1)}`", text)
    return LITERAL.sub(lambda m: f"`{m.group(1)}`", text).rstrip("\n")


class RSTRoles(griffe.Extension):
    """Rewrite every docstring once it is loaded."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
