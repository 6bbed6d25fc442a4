"""Conditions of a pattern (the set Θ): a tokenizer, a recursive-descent parser and the
three-valued evaluator that is the reference for every compiled form.

Grammar (docs/language.md; docs/language.md)::

    entry     := or ('and' or)*            -- a top-level 'and' splits the entry
    or        := and ('or' and)*
    and       := not ('and' not)*
    not       := 'not' not | predicate
    predicate := sum (OP sum | ['not'] 'in' '(' literal (',' literal)* ')')
               | '(' or ')'
    sum       := term (('+' | '-') term)*
    term      := unary (('*' | '/') unary)*
    unary     := '-' unary | primary
    primary   := literal | DURATION | NAME '.' NAME | 'prev' '(' NAME '.' NAME ')'
               | '(' sum ')' | 'count' '(' NAME ['.' NAME] ')' | AGG '(' NAME '.' NAME ')'
               | 'start_ts' | 'end_ts'
    AGG       := sum | avg | min | max | first | last
    DURATION  := INTEGER UNIT (no space between: 9d, 36h, 30min, 10s, 500ms)
    OP        := = | != | <> | < | <= | > | >=

Each conjunct of an entry becomes one condition, classified by the variables it names
(match-window paper, Def. 1): one variable, a *property*; two, a *relationship*; one
variable under ``prev()``, a *prev relationship* between consecutive events of a group
variable; a conjunct with an aggregate (``sum(p.value) > 300``, ``count(p) >= 3``) is an
*aggregate condition*, which holds or not for a whole match (docs/semantics.md). Keywords
are case-insensitive, attribute names are not.

Evaluation follows SQL's three-valued logic: a comparison with a missing value is
unknown, ``not`` of unknown is unknown, and a condition holds only when it is true. A
number and a string are never equal (``=`` false, ``!=`` true) and never ordered
(unknown). Arithmetic needs numbers; with a missing value, a division by zero or a
non-finite result it is missing.

The parser never evaluates anything: text becomes frozen dataclasses.
"""
