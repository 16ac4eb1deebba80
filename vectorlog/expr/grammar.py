"""The lark grammar of Milvus 2.4/2.5 boolean filter expressions (Plan.g4 in Milvus's
internal/parser/planparserv2), for an LALR parser with a contextual lexer."""

GRAMMAR = r"""
// Milvus 2.4/2.5 boolean filter expressions (internal/parser/planparserv2/Plan.g4), for lark LALR.
// Precedence, loosest first: or, and, not, predicates (comparisons, in, like, is null),
// + -, * / %, unary sign, ** (right-associative), atoms. Keywords are case-insensitive.

?start: disj

?disj: conj (_or conj)*
?conj: neg (_and neg)*
?neg: _not neg                      -> not_
    | pred
?pred: sum
    | sum CMP sum                   -> compare
    | sum CMP sum CMP sum           -> chain
    | sum _IN sum                   -> in_
    | sum _not _IN sum              -> not_in
    | sum _LIKE sum                 -> like
    | sum _IS _NULL                 -> is_null
    | sum _IS _not _NULL            -> is_not_null
?sum: prod (ADD prod)*
?prod: unary (MUL unary)*
?unary: ADD unary                   -> sign
    | power
?power: atom
    | atom POW unary                -> pow
?atom: INT                          -> int_
    | FLOAT                         -> float_
    | STRING                        -> string
    | TRUE                          -> true
    | FALSE                         -> false
    | path
    | NAME "(" [disj ("," disj)* ","?] ")"  -> call
    | LBRACE NAME "}"               -> template
    | LBRACKET [disj ("," disj)* ","?] "]"  -> list
    | "(" disj ")"
    | EXISTS atom                   -> exists

path: (NAME | META) ("[" (STRING | INT) "]")*

_or: _OR | "||"
_and: _AND | "&&"
_not: _NOT | "!"

_OR: "or"i
_AND: "and"i
_NOT: "not"i
_IN: "in"i
_LIKE: "like"i
_IS: "is"i
_NULL: "null"i
EXISTS: "exists"i
TRUE: "true"i
FALSE: "false"i

CMP: "==" | "!=" | "<=" | ">=" | "<" | ">"
ADD: "+" | "-"
MUL: "*" | "/" | "%"
POW: "**"
LBRACE: "{"
LBRACKET: "["
META: "$meta"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
FLOAT.2: /(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+/
INT: /0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*/
STRING: /"(\\.|[^"\\\r\n])*"|'(\\.|[^'\\\r\n])*'/

%ignore /[ \t\r\n]+/
"""
