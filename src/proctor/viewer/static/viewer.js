// proctor view: keyboard shortcuts and label posting. Plain JS, no dependencies, no inline script (CSP).
(function () {
  "use strict";
  var body = document.body;
  var csrf = document.querySelector('meta[name="csrf-token"]').content;
  var annot = document.getElementById("annotator");
  var BINARY = { c: "correct", i: "incorrect", u: "unsure" };

  if (annot) {
    annot.value = localStorage.getItem("proctor.annotator") || "";
    annot.addEventListener("change", function () { localStorage.setItem("proctor.annotator", annot.value.trim()); });
  }

  function toast(text, bad) {
    var t = document.getElementById("toast");
    t.textContent = text;  // text, never HTML
    t.className = bad ? "toast bad" : "toast";
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(function () { t.hidden = true; }, 2500);
  }

  function annotator() {
    var name = annot ? annot.value.trim() : "";
    if (!name) { toast("Type your annotator name first (top right).", true); if (annot) annot.focus(); }
    else { localStorage.setItem("proctor.annotator", name); }
    return name;
  }

  function chip(label, who, note) {
    var s = document.createElement("span");
    s.className = "chip " + (label === "correct" ? "good" : label === "incorrect" ? "bad" : "neutral");
    s.textContent = who + ": " + label;
    s.title = note || "";
    return s;
  }

  function postLabel(run, key, label, note, done) {
    var who = annotator();
    if (!who) return;
    fetch("/runs/" + encodeURIComponent(run) + "/labels", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ item_id: key, label: label, note: note || "", annotator: who }),
    }).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, body: j }; });
    }).then(function (res) {
      if (!res.ok) { toast(res.body.error || "label not stored", true); return; }
      toast("labelled " + res.body.label);
      done(res.body);
    }).catch(function (e) { toast("label not stored: " + e, true); });
  }

  function labelFor(ev, scale) {
    if (scale === "rating") return /^[1-4]$/.test(ev.key) ? ev.key : null;
    return BINARY[ev.key] || null;
  }

  function typing(ev) {
    var t = ev.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }

  // A selected row among `rows` (click, j / k, arrows); returns {rows, at(), select(i)}.
  function cursor(rows) {
    var at = 0;
    function select(i) {
      if (!rows.length) return;
      at = Math.max(0, Math.min(rows.length - 1, i));
      rows.forEach(function (r, j) { r.classList.toggle("selected", j === at); });
      rows[at].focus({ preventScroll: true });
      rows[at].scrollIntoView({ block: "nearest" });
    }
    rows.forEach(function (r, j) { r.addEventListener("click", function () { select(j); }); });
    select(0);
    return {
      at: function () { return at; },
      select: select,
      move: function (ev) {  // j / k / arrows: true when the key moved the selection
        if (ev.key === "j" || ev.key === "ArrowDown") { ev.preventDefault(); select(at + 1); return true; }
        if (ev.key === "k" || ev.key === "ArrowUp") { ev.preventDefault(); select(at - 1); return true; }
        return false;
      },
    };
  }

  // --- item browser --------------------------------------------------------------------------------
  function itemsPage() {
    var run = body.dataset.run;
    var rows = Array.prototype.slice.call(document.querySelectorAll("tr.item"));
    var cur = cursor(rows);
    document.addEventListener("keydown", function (ev) {
      if (typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "/") { ev.preventDefault(); document.getElementById("q").focus(); return; }
      if (cur.move(ev)) return;
      if (!rows.length) return;
      var at = cur.at(), row = rows[at];
      if (ev.key === "o" || ev.key === "Enter") { row.querySelector("a.open").click(); return; }
      var label = labelFor(ev, row.dataset.scale);
      if (!label) return;
      ev.preventDefault();
      if (!annotator()) return;
      cur.select(at + 1);  // move on at once: the next key labels the next row
      postLabel(run, row.dataset.key, label, "", function (lab) {
        var cell = row.querySelector("td.labels");
        Array.prototype.slice.call(cell.children).forEach(function (c) {
          if (c.textContent.indexOf(lab.annotator + ": ") === 0) cell.removeChild(c);
        });
        cell.appendChild(chip(lab.label, lab.annotator, lab.note));
      });
    });
  }

  // --- one item ------------------------------------------------------------------------------------
  function itemPage() {
    var run = body.dataset.run, key = body.dataset.key, scale = body.dataset.scale;
    var note = document.getElementById("note");
    function store(label) {
      postLabel(run, key, label, note.value, function (lab) {
        var tr = document.createElement("tr");
        [new Date(lab.time * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC", lab.annotator, lab.label, lab.note]
          .forEach(function (v) { var td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
        document.querySelector("#history tbody").appendChild(tr);
        note.value = "";
      });
    }
    Array.prototype.forEach.call(document.querySelectorAll("[data-label]"), function (b) {
      b.addEventListener("click", function () { store(b.dataset.label); });
    });
    document.addEventListener("keydown", function (ev) {
      if (typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) {
        if (ev.key === "Escape" && ev.target === note) note.blur();
        return;
      }
      if (ev.key === "n") { ev.preventDefault(); note.focus(); return; }
      if (ev.key === "j" && body.dataset.next) { location.href = body.dataset.next; return; }
      if (ev.key === "k" && body.dataset.prev) { location.href = body.dataset.prev; return; }
      var label = labelFor(ev, scale);
      if (label) { ev.preventDefault(); store(label); }
    });
  }

  // --- pairwise preference (compare page) ---------------------------------------------------------
  function comparePage() {
    var PREF = { a: "a", b: "b", t: "tie" };
    var rows = Array.prototype.slice.call(document.querySelectorAll("tr.flip"));
    var cur = cursor(rows);
    function prefer(row, label) {
      var who = annotator();
      if (!who) return;
      fetch("/compare/preferences", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify({ run_a: body.dataset.runA, item_a: row.dataset.keyA, run_b: body.dataset.runB,
                               item_b: row.dataset.keyB, label: label, annotator: who }),
      }).then(function (r) {
        return r.json().then(function (j) { return { ok: r.ok, body: j }; });
      }).then(function (res) {
        if (!res.ok) { toast(res.body.error || "preference not stored", true); return; }
        var cell = row.querySelector("div.prefs");
        Array.prototype.slice.call(cell.children).forEach(function (c) {
          if (c.textContent.indexOf(res.body.annotator + ": ") === 0) cell.removeChild(c);
        });
        var s = document.createElement("span");
        s.className = "chip neutral";
        s.textContent = res.body.annotator + ": " + (label === "tie" ? "tie" : label.toUpperCase());
        cell.appendChild(s);
        toast("preferred " + (label === "tie" ? "neither (tie)" : label.toUpperCase()));
      }).catch(function (e) { toast("preference not stored: " + e, true); });
    }
    rows.forEach(function (row) {
      Array.prototype.forEach.call(row.querySelectorAll("[data-pref]"), function (b) {
        b.addEventListener("click", function (ev) { ev.stopPropagation(); prefer(row, b.dataset.pref); });
      });
    });
    document.addEventListener("keydown", function (ev) {
      if (typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (cur.move(ev) || !rows.length) return;
      var label = PREF[ev.key];
      if (!label) return;
      ev.preventDefault();
      var at = cur.at();
      if (!annotator()) return;
      prefer(rows[at], label);
      cur.select(at + 1);
    });
  }

  // --- labels import (meta-evaluation page) ---------------------------------------------------------
  var file = document.getElementById("import-file");
  if (file) {
    file.addEventListener("change", function () {
      var f = file.files[0];
      if (!f) return;
      var run = location.pathname.split("/")[2];
      f.text().then(function (text) {
        return fetch("/runs/" + run + "/labels/import?annotator=" + encodeURIComponent(annot.value.trim()), {
          method: "POST", headers: { "Content-Type": "application/x-ndjson", "X-CSRF-Token": csrf }, body: text,
        });
      }).then(function (r) { return r.json(); }).then(function (j) {
        document.getElementById("import-result").textContent =
          j.error ? "not imported: " + j.error : "added " + j.added + ", skipped " + j.skipped + " (already stored)";
      });
    });
  }

  if (body.dataset.page === "items") itemsPage();
  if (body.dataset.page === "item") itemPage();
  if (body.dataset.page === "compare") comparePage();
  if (body.dataset.live) setTimeout(function () { location.reload(); }, 1000 * Number(body.dataset.live));
})();
