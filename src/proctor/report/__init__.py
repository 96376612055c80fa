"""Static, self-contained HTML report of a run, built from its run record (`proctor.load_run`) only.

`write_report(run, path)` writes one HTML file that opens offline; `render_report_html(run)`
returns the same page as a string. Protocols add their own section to `SECTIONS`
(see `proctor.report.sections`).
"""

from proctor.report.render import render_report_html, write_report
from proctor.report.sections import SECTIONS, SectionRenderer, register_section

__all__ = ["SECTIONS", "SectionRenderer", "register_section", "render_report_html", "write_report"]
