"""Kubernetes resource quantities ("3920m", "4", "1.5", "2Ki", "1e3"), parsed exactly.

The grammar is the API server's own (k8s.io/apimachinery `resource.Quantity`):

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

with ASCII digits only, and, as upstream parses it, an integer exponent and a non-zero
value finer than 1n rounded away from zero to 1n. Unlike upstream, the text and the
exponent are bounded *before* any arithmetic, so a hostile value such as "1e-999999999"
is refused at once instead of building a number with a billion digits. Parsing this here
(rather than with the `kubernetes` client's helper) also keeps that 0.45 s import out of
every command that only reads a snapshot.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

# Canonical quantities are at most ~20 characters; 64 leaves room for hand-written ones.
MAX_QUANTITY_LENGTH = 64
# 10^±30 spans every real resource (nano-cores to exabytes) with room to spare.
MAX_DECIMAL_EXPONENT = 30

_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_NANO = 10**9

# [0-9], not \d: Python's \d also matches other scripts' digits ("١٢"), which Go's
# parser does not.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:(?P<si>[KMGTPE]i|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?",
    re.ASCII,
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity, or one outside the bounds this exporter accepts."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string; raises QuantityError."""
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(f"longer than {MAX_QUANTITY_LENGTH} characters")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity")
    whole, fraction = match["whole"], match["fraction"] or ""
    if not whole and not fraction:
        raise QuantityError(f"{text!r} has no digits")
    mantissa = int(whole + fraction or "0")
    decimal_exponent = -len(fraction)
    binary_exponent = 0
    if match["exponent"] is not None:
        exponent = match["exponent"]
        # The text is at most 64 characters, so int() is cheap; 10**exponent might not be.
        if abs(int(exponent)) > MAX_DECIMAL_EXPONENT:
            raise QuantityError(f"{text!r}: exponent outside ±{MAX_DECIMAL_EXPONENT}")
        decimal_exponent += int(exponent)
    elif match["si"] in _BINARY_SI:
        binary_exponent = _BINARY_SI[match["si"]]
    else:
        decimal_exponent += _DECIMAL_SI[match["si"] or ""]
    # |decimal_exponent| <= 64 + 30 here, so these powers are small.
    value = Fraction(mantissa << binary_exponent) * Fraction(10) ** decimal_exponent
    if value and (value * _NANO).denominator != 1:
        # Upstream keeps nano precision and rounds a finer remainder away from zero.
        value = Fraction(math.ceil(value * _NANO), _NANO)
    return -value if match["sign"] == "-" else value
