"""One self-contained HTML page per training run or evaluation (``report.html``).

The page needs nothing from elsewhere: pictures are embedded (``data:`` URIs; large PNGs as JPEG),
styles and the small script (sorting the per-class table) are inline, no font or network. It holds
the headline figures, the settings and the dataset summary, the curves, the per-class table
(sortable), the error breakdown, the confusion matrix and the galleries.

- :func:`run_report`: a training run's folder (``run.json``, ``history.csv``, its pictures and
  ``diagnostics/``);
- :func:`evaluation_report`: the JSON ``yolo3 evaluate --out`` wrote, with its pictures beside it.

Opened with ``#selftest`` in its address, the page checks itself (every image decoded, the sort
works, no script error) and writes the verdict into ``<pre id="selftest">``: the browser test.
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from PIL import Image

from yolo3.core.errors import FileFormatError
from yolo3.core.fileio import read_csv_rows, read_json
from yolo3.core.output_folder import YOLO3_SOFTWARE
from yolo3.core.version import __version__
from yolo3.evaluation.error_analysis import ERROR_TYPES, SHORT_NAMES
from yolo3.evaluation.full_evaluation import picture_paths

__all__ = ["REPORT", "run_report", "evaluation_report", "render_report"]


REPORT = "report.html"
RECOMPRESS_ABOVE = 250_000  # bytes: a larger PNG is embedded as a JPEG
Picture = Tuple[str, str]  # (title, path)

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1280px;
padding:0 18px 40px;color:#1d232a;background:#fff}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:3px}nav a{margin-right:12px}.muted{color:#667}table{border-collapse:collapse;
margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}td:first-child,
th:first-child{text-align:left}th{background:#f3f5f7}th.sortable{cursor:pointer;user-select:none}
th.sortable:after{content:" \\2195";color:#999}.figs{display:flex;flex-wrap:wrap;gap:14px}
figure{margin:0}figcaption{font-size:12px;color:#556}img{max-width:100%;height:auto;
border:1px solid #e3e3e3}.headline td{font-size:16px}pre#selftest{display:none}
"""

_SCRIPT = """
(function(){
var errors=[];window.addEventListener('error',function(e){errors.push(String(e.message))});
function value(cell){var v=cell.getAttribute('data-value');if(v===null)return cell.textContent;
var f=parseFloat(v);return isNaN(f)?-Infinity:f}
function sortBy(th){var table=th.closest('table'),body=table.tBodies[0],col=th.cellIndex;
var down=th.getAttribute('data-order')!=='desc';th.setAttribute('data-order',down?'desc':'asc');
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){var x=value(a.cells[col]),
y=value(b.cells[col]);if(x===y)return 0;return (x<y?-1:1)*(down?-1:1)});
rows.forEach(function(r){body.appendChild(r)})}
document.querySelectorAll('th.sortable').forEach(function(th){th.addEventListener('click',
function(){sortBy(th)})});
function selftest(){var images=document.images,broken=[];for(var i=0;i<images.length;i++){
if(!images[i].complete||images[i].naturalWidth===0)broken.push(images[i].alt)}
var sorted=null,th=document.querySelector('th.sortable[data-key="AP50_95"]');
if(th){sortBy(th);var rows=th.closest('table').tBodies[0].rows,col=th.cellIndex,ok=true;
for(var i=1;i<rows.length;i++){if(value(rows[i-1].cells[col])<value(rows[i].cells[col]))ok=false}
sorted=ok}var out=document.getElementById('selftest');out.textContent=JSON.stringify({images:
images.length,broken:broken,sorted:sorted,errors:errors});out.setAttribute('data-done','1')}
if(location.hash==='#selftest'){if(document.readyState==='complete')selftest();
else window.addEventListener('load',selftest)}
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def embed(path: str) -> str:
    """A ``data:`` URI of the picture at ``path`` (a PNG above :data:`RECOMPRESS_ABOVE` bytes as
    a JPEG of quality 85)."""
    with open(path, "rb") as f:
        data = f.read()
    mime = "image/jpeg" if path.lower().endswith((".jpg", ".jpeg")) else "image/png"
    if mime == "image/png" and len(data) > RECOMPRESS_ABOVE:
        buffer = io.BytesIO()
        with Image.open(io.BytesIO(data)) as image:
            image.convert("RGB").save(buffer, format="JPEG", quality=85)
        data, mime = buffer.getvalue(), "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _figures(pictures: Sequence[Picture]) -> str:
    parts = [f'<figure><img alt="{_e(title)}" src="{embed(path)}"><figcaption>{_e(title)}'
             f'</figcaption></figure>' for title, path in pictures if os.path.isfile(path)]
    return f'<div class="figs">{"".join(parts)}</div>' if parts else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_number(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CLASS_COLUMNS = ("num_gt", "num_det", "AP50", "AP75", "AP50_95", "AP_small", "AP_medium",
                  "AP_large")


def _class_table(per_class: Sequence[Mapping[str, Any]]) -> str:
    """The per-class figures, each column sortable (click its header)."""
    columns = [c for c in _CLASS_COLUMNS if any(c in row for row in per_class)]
    head = '<th class="sortable" data-key="name">class</th>' + "".join(
        f'<th class="sortable" data-key="{c}">{_e(c)}</th>' for c in columns)
    body = []
    for row in per_class:
        cells = [f'<td data-value="{_e(row.get("name"))}">{_e(row.get("name"))}</td>']
        for c in columns:
            v = row.get(c)
            cells.append(f'<td data-value="{"" if v is None else _e(v)}">{_number(v)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table id="per-class"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            "</tbody></table>")


def _errors_section(evaluation: Mapping[str, Any]) -> str:
    errors = evaluation.get("errors")
    if not errors:
        return ""
    rows = [[f"{SHORT_NAMES[t]} ({t})", 100 * errors["delta_ap"][t], errors["counts"][t]]
            for t in ERROR_TYPES]
    rows += [["all false positives", 100 * errors["special"]["false_positives"], ""],
             ["all missed boxes", 100 * errors["special"]["false_negatives"], ""]]
    text = [f"<p>TIDE's breakdown at IoU {errors['pos_iou']}: AP@0.5 "
            f"{100 * errors['ap50']:.2f} points; each row is the AP gained by fixing that error "
            "type alone. The types overlap: they do not add up to the AP that is missing.</p>",
            _table(["error type", "AP@0.5 points", "count"], rows)]
    per_class = evaluation.get("errors_per_class")
    if per_class:
        kinds = [t for t in ERROR_TYPES if t != "missed"]
        header = ["class"] + [f"FP {SHORT_NAMES[t]}" for t in kinds] + [
            "missed small", "missed medium", "missed large"]
        table = [[row["name"]] + [row["false_positives"][t] for t in kinds]
                 + [f"{row['missed'][s]} / {row['boxes'][s]}" for s in ("small", "medium", "large")]
                 for row in per_class["per_class"]]
        text.append(f"<p>At confidence {per_class['score']:.3f} (the best F1's): false positives "
                    "by cause, missed boxes by COCO size (missed / all).</p>")
        text.append(_table(header, table))
    return "".join(text)


def _headline(evaluation: Mapping[str, Any]) -> str:
    keys = [("mAP@0.5:0.95", "mAP50_95"), ("mAP@0.5", "mAP50"), ("mAP@0.75", "mAP75"),
            ("AP small", "mAP_small"), ("AP medium", "mAP_medium"), ("AP large", "mAP_large")]
    cells = [(label, evaluation.get(key)) for label, key in keys if key in evaluation]
    best = (evaluation.get("confidence_curves") or {}).get("best")
    if best:
        cells.append((f"best F1 (confidence {best['confidence']:.3f})", best["f1"]))
    return ('<table class="headline"><tr>' + "".join(f"<th>{_e(k)}</th>" for k, _ in cells)
            + "</tr><tr>" + "".join(f"<td>{_number(v)}</td>" for _, v in cells) + "</tr></table>")


def render_report(title: str, facts: Sequence[str], settings: Mapping[str, Any],
                  dataset: Sequence[Tuple[str, Any]], evaluation: Optional[Mapping[str, Any]],
                  sections: Sequence[Tuple[str, Sequence[Picture]]]) -> str:
    """The page: ``facts`` (lines under the title), ``settings`` (a table), ``dataset`` (rows of
    the summary), ``evaluation`` (``yolo3 evaluate``'s JSON: headline, per-class table, errors)
    and ``sections`` (a heading and its pictures, in order; missing files left out)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             # the mark of a page yolo3 wrote (yolo3.core.output_folder.written_by_yolo3)
             f'<meta name="generator" content="{YOLO3_SOFTWARE} {_e(__version__)}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>"]
    parts += [f'<div class="muted">{_e(line)}</div>' for line in facts]
    nav = [("figures", "Figures"), ("settings", "Settings and data")]
    nav += [(f"s{k}", heading) for k, (heading, pictures) in enumerate(sections)
            if any(os.path.isfile(p) for _, p in pictures)]
    has_classes = bool(evaluation and evaluation.get("per_class"))
    has_errors = bool(evaluation and evaluation.get("errors"))
    if has_classes:
        nav.insert(1, ("classes", "Per class"))
    if has_errors:
        nav.insert(1 + has_classes, ("errors", "Errors"))
    parts.append("<nav>" + "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t in nav) + "</nav>")
    parts.append('<h2 id="figures">Figures</h2>')
    parts.append(_headline(evaluation) if evaluation else "<p>No evaluation in this run.</p>")
    if has_classes:
        parts.append('<h2 id="classes">Per class</h2><p class="muted">Click a column to sort.</p>')
        parts.append(_class_table(evaluation["per_class"]))
    if has_errors:
        parts.append('<h2 id="errors">Errors</h2>' + _errors_section(evaluation))
    parts.append('<h2 id="settings">Settings and data</h2>')
    if dataset:
        parts.append(_table(["dataset", ""], dataset))
    if settings:
        rows = [[k, json.dumps(v) if isinstance(v, (list, tuple, dict)) else v]
                for k, v in settings.items()]
        parts.append("<details><summary>Settings</summary>" + _table(["setting", "value"], rows)
                     + "</details>")
    for k, (heading, pictures) in enumerate(sections):
        figures = _figures(pictures)
        if figures:
            parts.append(f'<h2 id="s{k}">{_e(heading)}</h2>{figures}')
    parts.append(f'<pre id="selftest"></pre><script>{_SCRIPT}</script></body></html>')
    return "\n".join(parts)


def _evaluation_sections(pictures: Mapping[str, str]) -> List[Tuple[str, Sequence[Picture]]]:
    return [("Curves", [("precision against recall (IoU 0.5)", pictures["pr"]),
                        ("precision, recall and F1 against confidence", pictures["confidence"])]),
            ("Confusion matrix and errors", [("confusion matrix", pictures["confusion"]),
                                             ("error breakdown (TIDE)", pictures["errors"])]),
            ("Worst images", [("labels (left) beside predictions (right)", pictures["worst"])])]


def _dataset_rows(evaluation: Optional[Mapping[str, Any]]) -> List[Tuple[str, Any]]:
    if not evaluation:
        return []
    rows: List[Tuple[str, Any]] = [("images evaluated", evaluation.get("num_images"))]
    rows += [(f"boxes of {c['name']}", c["num_gt"]) for c in evaluation.get("per_class", [])]
    return rows


def evaluation_report(json_path: str, evaluation: Optional[Mapping[str, Any]] = None) -> str:
    """The page of ``yolo3 evaluate``'s JSON at ``json_path`` and its pictures beside it;
    ``evaluation``: that JSON's content where the caller holds it already (read otherwise)."""
    if evaluation is None:
        evaluation = read_json(json_path, "evaluation")
    stem = os.path.splitext(json_path)[0]
    pictures = picture_paths(f"{stem}_")
    facts = [f"evaluation {os.path.abspath(json_path)}", f"yolo3 {__version__}"]
    return render_report(f"yolo3 evaluation: {os.path.basename(stem)}", facts,
                         evaluation.get("settings", {}), _dataset_rows(evaluation), evaluation,
                         _evaluation_sections(pictures))


def _history_rows(path: str) -> List[Dict[str, str]]:
    return read_csv_rows(path, "history")[1] if os.path.isfile(path) else []


def _object(path: str, what: str) -> Dict[str, Any]:
    """A JSON object yolo3 wrote (``run.json``, an evaluation); anything else is refused, named."""
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise FileFormatError(path, f"{what} file holds {type(value).__name__}, not the object "
                                    "yolo3 writes")
    return value


def run_report(folder: str) -> str:
    """The page of the training run in ``folder``."""
    run: Dict[str, Any] = {}
    if os.path.isfile(os.path.join(folder, "run.json")):
        run = _object(os.path.join(folder, "run.json"), "run")
    evaluation = None
    diagnostics = os.path.join(folder, "diagnostics", "diagnostics.json")
    if os.path.isfile(diagnostics):
        evaluation = _object(diagnostics, "evaluation")
    history = _history_rows(os.path.join(folder, "history.csv"))
    facts = [f"training run {os.path.abspath(folder)}", f"yolo3 {__version__}"]
    if history:
        facts.append(f"{len(history)} epochs in history.csv")
    if evaluation and "epoch" in evaluation:
        facts.append(f"figures of the validation set after epoch {evaluation['epoch']}")
    dataset = [(k.replace("_", " "), v) for k, v in run.get("dataset", {}).items()
               if not isinstance(v, (list, dict))]
    counts = run.get("dataset", {}).get("boxes_per_class", {})
    dataset += [(f"training boxes of {name}", n) for name, n in counts.items()]
    batches = sorted(p for p in os.listdir(folder) if p.startswith("train_batch")
                     and p.endswith(".jpg")) if os.path.isdir(folder) else []
    sections: List[Tuple[str, Sequence[Picture]]] = [
        ("Training", [("every logged series by epoch", os.path.join(folder, "results.png"))]),
        ("The labels", [("class counts, box centres and sizes", os.path.join(folder, "labels.png"))]),
        ("What the model is given", [(f"training batch {name[11:-4]}", os.path.join(folder, name))
                                     for name in batches]),
        ("Validation gallery", [("labels (left) beside predictions (right), the best epoch",
                                 os.path.join(folder, "val_gallery.png"))]),
    ]
    sections += _evaluation_sections(picture_paths(os.path.join(folder, "diagnostics", "")))
    return render_report(f"yolo3 training run: {os.path.basename(os.path.abspath(folder))}", facts,
                         run.get("settings", {}), dataset, evaluation, sections)
