"""How wide a text is drawn, without a browser: the chart code sizes each SVG to its labels.

Advance widths, in thousandths of the font size, of DejaVu Sans (Book and Bold) for the
printable ASCII characters, as Chromium measured them (canvas `measureText` at 1000 px).
DejaVu Sans is what `sans-serif` is on Debian and one of the widest common sans-serif faces
(Arial, Helvetica and Liberation Sans are narrower), so a label sized by it fits elsewhere
too. Any other character counts as a full em (the width of a CJK character or of `—`).
"""

from __future__ import annotations

_FIRST = 32  # the space; the tables run to `~` (126)
_BOOK = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,
    1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,
    603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,
    500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,
    635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)  # fmt: skip
_BOLD = (
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365,
    696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580,
    1000, 774, 762, 734, 830, 683, 683, 821, 837, 372, 372, 775, 637, 995, 837, 850,
    733, 850, 770, 720, 682, 812, 774, 1103, 771, 724, 725, 457, 365, 457, 838, 500,
    500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665, 343, 1042, 712, 687,
    716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838,
)  # fmt: skip
_OTHER = 1000


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The drawn width of `text` in px at font size `size` px."""
    table = _BOLD if bold else _BOOK
    units = 0
    for ch in text:
        i = ord(ch) - _FIRST
        units += table[i] if 0 <= i < len(table) else _OTHER
    return units * size / 1000


def shorten(text: str, width: float, size: float) -> str:
    """`text` cut to fit `width` px, ending in `…` where it was cut."""
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text.rstrip() + "…"


def wrap(text: str, width: float, size: float, max_lines: int = 2) -> list[str]:
    """`text` in at most `max_lines` lines of at most `width` px, broken at spaces (a word
    wider than a line is cut); what does not fit ends the last line in `…`."""
    lines: list[str] = []
    rest = text.split(" ")
    while rest and len(lines) < max_lines:
        line = rest.pop(0)
        while rest and text_width(line + " " + rest[0], size) <= width:
            line += " " + rest.pop(0)
        lines.append(line)
    if rest:  # more words than lines: the last line carries them, shortened
        lines[-1] = " ".join([lines[-1], *rest])
    return [shorten(line, width, size) for line in lines]
