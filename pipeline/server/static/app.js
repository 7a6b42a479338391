// The gamebatch page: uploads, a live job list from the event feed, and grading results.
// Plain browser JavaScript; every text from the server goes in through textContent.
"use strict";

const TOKEN_KEY = "gamebatch-token";
const GRADING_KEY = "gamebatch-grading";
let ENDED = new Set(["done", "failed", "cancelled", "refused"]); // the API's, once it said
const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  since: null, // the last event seen: the feed resumes from it
  rows: new Map(), // job id -> its table row
  grading: null, // the grading on show
  report: null,
  sort: { key: "rank", ascending: true },
  feed: null, // AbortController of the event feed
};

const $ = (id) => document.getElementById(id);

function headers(extra = {}) {
  return state.token ? { Authorization: `Bearer ${state.token}`, ...extra } : extra;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (!response.ok) {
    throw new ApiError(response.status, await errorText(response));
  }
  return response;
}

async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.error) {
      return response.status === 401 ? "wrong or expired token: " + body.error : body.error;
    }
  } catch (_) {
    // not JSON: the status says enough
  }
  return `HTTP ${response.status}`;
}

function say(id, text, ok = false) {
  const element = $(id);
  element.textContent = text;
  element.classList.toggle("ok", ok);
}

function cell(row, text, className, label) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  if (label) td.dataset.label = label; // the heading of a job card at phone width
  row.appendChild(td);
  return td;
}

function bytes(size) {
  if (size == null || size === "") return "";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let value = Number(size);
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit ? value.toFixed(value < 10 ? 1 : 0) : value} ${units[unit]}`;
}

function duration(job) {
  if (!job.created) return "";
  const end = job.finished || (ENDED.has(job.state) ? job.created : Date.now() / 1000);
  const seconds = Math.max(0, end - job.created);
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

// ---- token

async function useToken(event) {
  event.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem(TOKEN_KEY, state.token);
  await start();
}

async function start() {
  if (state.feed) state.feed.abort();
  if (!state.token) { // nothing to say against a token not yet typed
    say("token-message", "");
    setLive(false, "not connected: enter an API token");
    return;
  }
  try {
    const response = await api("/v1/problems");
    const { problems } = await response.json();
    for (const select of document.querySelectorAll("select.problems")) {
      select.replaceChildren(...problems.map((name) => new Option(name, name)));
    }
    say("token-message", "token accepted", true);
  } catch (error) {
    say("token-message", error.message);
    setLive(false, "not connected");
    return;
  }
  await loadJobs();
  followEvents();
  await loadGradings();
}

// ---- jobs

async function loadJobs() {
  const response = await api("/v1/jobs?limit=50");
  const body = await response.json();
  state.since = body.events_since;
  if (body.finished_states) ENDED = new Set([...body.finished_states, "refused"]);
  $("jobs").tBodies[0].replaceChildren();
  state.rows.clear();
  for (const job of body.jobs.reverse()) showJob(job);
}

function progressBar(className, label, value) {
  const bar = document.createElement("progress");
  bar.max = 1;
  bar.value = value;
  bar.className = className;
  bar.setAttribute("aria-label", label);
  return bar;
}

function jobRow(id) {
  let row = state.rows.get(id);
  if (!row) {
    row = document.createElement("tr");
    row.dataset.job = id;
    cell(row, id, "name", "File");
    cell(row, "", "state", "State");
    cell(row, "", "size number", "Size");
    cell(row, "", "cases number", "Cases");
    cell(row, "", "time number", "Time");
    cell(row, "", "", "Uploaded").appendChild(progressBar("uploaded", "bytes uploaded", 1));
    cell(row, "", "", "Solved").appendChild(progressBar("solved", "cases solved", 0));
    const actions = cell(row, "", "", "Actions");
    const download = document.createElement("button");
    download.type = "button";
    download.textContent = "Download";
    download.className = "download";
    download.addEventListener("click", () => downloadResult(row.dataset.job, row.dataset.name));
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.className = "cancel";
    cancel.addEventListener("click", () => cancelJob(row.dataset.job));
    actions.append(download, " ", cancel);
    $("jobs").tBodies[0].prepend(row);
    state.rows.set(id, row);
  }
  return row;
}

function showJob(job) {
  const row = jobRow(job.id);
  row.dataset.name = job.name || job.id;
  row.querySelector(".name").textContent = job.name || job.id;
  row.querySelector(".size").textContent = bytes(job.size);
  row.querySelector(".cases").textContent = job.total == null ? "" : String(job.total);
  row.querySelector(".time").textContent = duration(job);
  const stateCell = row.querySelector(".state");
  stateCell.textContent = job.state;
  stateCell.classList.toggle("error", job.state === "failed" || job.state === "refused");
  let error = row.querySelector(".job-error");
  if (job.errors && job.errors.length) {
    if (!error) {
      error = document.createElement("div");
      error.className = "job-error error";
      stateCell.appendChild(error);
    }
    error.textContent = job.errors[0];
  }
  const bar = row.querySelector(".solved");
  if (job.total) bar.max = job.total;
  if (job.done != null) bar.value = job.done;
  if (job.state === "done") bar.value = bar.max;
  row.querySelector(".download").disabled = job.state !== "done";
  row.querySelector(".cancel").disabled = ENDED.has(job.state);
}

async function refreshJob(id) {
  try {
    const response = await api(`/v1/jobs/${encodeURIComponent(id)}`);
    showJob(await response.json());
  } catch (error) {
    say("solve-message", error.message);
  }
}

function uploadFile(file, url, bar) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(url.method, url.path);
    for (const [name, value] of Object.entries(headers())) xhr.setRequestHeader(name, value);
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable && bar) {
        bar.max = event.total || 1;
        bar.value = event.loaded;
      }
    });
    xhr.addEventListener("load", () => {
      let body = {};
      try {
        body = JSON.parse(xhr.responseText);
      } catch (_) {
        body = { error: `HTTP ${xhr.status}` };
      }
      if (xhr.status >= 400) {
        const prefix = xhr.status === 401 ? "wrong or expired token: " : "";
        reject(new ApiError(xhr.status, prefix + (body.error || `HTTP ${xhr.status}`)));
      } else {
        resolve(body);
      }
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, "the connection was lost")));
    xhr.send(file);
  });
}

let uploads = 0; // rows of uploads still in flight are keyed "upload-N" until their job is known

async function solveFiles(event) {
  event.preventDefault();
  const problem = $("solve-problem").value;
  const files = [...$("files").files];
  if (!files.length) {
    say("solve-message", "choose one or more input files");
    return;
  }
  say("solve-message", "");
  await Promise.all(files.map((file) => solveFile(file, problem)));
}

async function solveFile(file, problem) {
  const key = `upload-${++uploads}`;
  const row = jobRow(key);
  showJob({ id: key, name: file.name, state: "uploading" });
  row.querySelector(".download").disabled = true;
  row.querySelector(".cancel").disabled = true;
  const bar = row.querySelector(".uploaded");
  bar.value = 0;
  const query = `problem=${encodeURIComponent(problem)}&name=${encodeURIComponent(file.name)}`;
  try {
    const job = await uploadFile(file, { method: "PUT", path: `/v1/jobs?${query}` }, bar);
    state.rows.delete(key);
    const shown = state.rows.get(job.id);
    if (shown) shown.replaceWith(row); // the feed showed the job first: keep the bytes bar
    row.dataset.job = job.id;
    state.rows.set(job.id, row);
    showJob(job);
  } catch (error) {
    showJob({ id: key, name: file.name, state: "refused", errors: [error.message] });
  }
}

function downloadResult(id, name) {
  return download(`/v1/jobs/${encodeURIComponent(id)}/result`, `${name}.out`, "solve-message");
}

// A download with the token in its header (a plain link could not send it).
async function download(path, name, messageId) {
  try {
    const response = await api(path);
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (error) {
    say(messageId, error.message);
  }
}

async function cancelJob(id) {
  try {
    const response = await api(`/v1/jobs/${encodeURIComponent(id)}`, { method: "DELETE" });
    showJob(await response.json());
  } catch (error) {
    say("solve-message", error.message);
  }
}

// ---- the event feed (fetch, so that the token goes in a header; resumes from the last id)

function setLive(live, text) {
  const element = $("live");
  element.textContent = text || (live ? "live" : "reconnecting…");
  element.classList.toggle("live", live);
}

async function followEvents() {
  const controller = new AbortController();
  state.feed = controller;
  let pause = 500;
  while (!controller.signal.aborted) {
    try {
      const since = encodeURIComponent(state.since || "0");
      const response = await fetch(`/v1/events?since=${since}`, {
        headers: headers(), signal: controller.signal, cache: "no-store",
      });
      if (response.status === 401 || response.status === 403) {
        say("token-message", await errorText(response));
        setLive(false, "not connected");
        return;
      }
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      setLive(true);
      pause = 500;
      await readFeed(response.body.getReader());
    } catch (_) {
      if (controller.signal.aborted) return;
    }
    setLive(false);
    await new Promise((resolve) => setTimeout(resolve, pause));
    pause = Math.min(pause * 2, 8000);
  }
}

async function readFeed(reader) {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      handleEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
}

function handleEvent(block) {
  let id = null;
  let data = null;
  for (const line of block.split("\n")) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("data:")) data = line.slice(5).trim();
  }
  if (id) state.since = id;
  if (!data) return;
  const event = JSON.parse(data);
  if (event.type.startsWith("grading.")) {
    if (state.grading && event.job === state.grading) refreshGrading();
    return;
  }
  if (event.type === "refused") { // an upload that never became a job
    const row = state.rows.get(event.job);
    if (row) row.remove();
    state.rows.delete(event.job);
    return;
  }
  if (event.type === "progress") {
    const row = state.rows.get(event.job);
    if (row) {
      const bar = row.querySelector(".solved");
      bar.max = Math.max(event.read || 1, 1);
      bar.value = event.done || 0;
      row.querySelector(".state").firstChild.textContent = "running";
    }
    return;
  }
  refreshJob(event.job);
}

// ---- grading

async function gradeArchive(event) {
  event.preventDefault();
  await sendArchive("/v1/gradings");
}

async function hackArchive() {
  await sendArchive("/v1/hacks");
}

// A grading (or a hack search) of the archive chosen in the form.
async function sendArchive(route) {
  const archive = $("archive").files[0];
  if (!archive) {
    say("grade-message", "choose an archive");
    return;
  }
  const problem = encodeURIComponent($("grade-problem").value);
  say("grade-message", "uploading…", true);
  $("grading").hidden = true;
  $("hack").hidden = true;
  try {
    const grading = await uploadFile(archive, {
      method: "POST", path: `${route}?problem=${problem}`,
    }, $("archive-progress"));
    remember(grading.id);
    showGradingState(grading);
    if (grading.state === "done") await showReport(grading);
    await loadGradings();
  } catch (error) {
    say("grade-message", error.message);
  }
}

// The grading on show survives a reload: its id is in the address and in this tab's storage.
function remember(id) {
  state.grading = id;
  sessionStorage.setItem(GRADING_KEY, id);
  history.replaceState(null, "", `#grading=${encodeURIComponent(id)}`);
}

function rememberedGrading() {
  const match = /^#grading=([^&]+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : sessionStorage.getItem(GRADING_KEY);
}

async function loadGradings() {
  let gradings = [];
  try {
    gradings = (await (await api("/v1/gradings?limit=20")).json()).gradings || [];
  } catch (_) {
    gradings = []; // a token that may not list them: the one on show still is
  }
  const select = $("recent");
  select.replaceChildren(new Option("choose…", ""),
    ...gradings.map((g) => new Option(gradingLabel(g), g.id)));
  $("recent-gradings").hidden = gradings.length === 0;
  const wanted = rememberedGrading();
  if (wanted && wanted !== state.grading) {
    state.grading = wanted;
    await refreshGrading();
  }
  if (state.grading) select.value = state.grading;
}

function gradingLabel(grading) {
  const when = grading.created ? ` · ${new Date(grading.created * 1000).toLocaleString()}` : "";
  return `${grading.id.slice(0, 12)} · ${grading.problem || ""} · ${grading.state}${when}`;
}

async function showRecent() {
  const id = $("recent").value;
  if (!id) return;
  remember(id);
  $("grading").hidden = true;
  $("hack").hidden = true;
  await refreshGrading();
}

function showGradingState(grading) {
  const notes = grading.notes || [];
  const what = { hack: "hack search", verification: "verification", "package-grading": "package grading" }[grading.kind] || "grading";
  const text = grading.state === "failed" ? `${what} failed: ${grading.error}` : `${what} ${grading.state}`;
  say("grade-message", text, grading.state !== "failed");
  const listed = [...$("recent").options].find((option) => option.value === grading.id);
  if (listed) listed.textContent = gradingLabel(grading);
  $("grading-notes").replaceChildren(...notes.map((note) => {
    const item = document.createElement("li");
    item.textContent = note;
    return item;
  }));
  const links = Object.entries(grading.links || {}).filter(([name]) => name !== "self");
  $("grading-links").replaceChildren(...(grading.state === "done" ? links : []).map(([name, path]) => {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `Download ${name}`;
    button.addEventListener("click", () => download(path, `${grading.id}-${name}${name === "junit" ? ".xml" : ""}`, "grade-message"));
    return button;
  }));
}

async function refreshGrading() {
  try {
    const route = state.grading.startsWith("hack.") ? "hacks"
      : state.grading.startsWith("verify.") ? "verifications"
        : state.grading.startsWith("grade.") ? "package-gradings" : "gradings";
    const response = await api(`/v1/${route}/${encodeURIComponent(state.grading)}`);
    const grading = await response.json();
    showGradingState(grading);
    if (grading.state === "done") await showReport(grading);
  } catch (error) {
    say("grade-message", error.message);
  }
}

async function showReport(grading) {
  if (grading.kind === "hack") {
    await showHacks(grading);
    return;
  }
  $("hack").hidden = true;
  if (grading.kind === "verification" || grading.kind === "package-grading") {
    // a problem package's run: its summary lines (the reports are links above)
    const lines = (grading.summary && grading.summary.lines) || [];
    $("grading-notes").replaceChildren(...lines.map((line) => {
      const item = document.createElement("li");
      item.textContent = line;
      return item;
    }));
    $("grading").hidden = true;
    return;
  }
  const report = await (await api(grading.links["report.json"])).json();
  state.report = report;
  renderScoreboard();
  const select = $("submission");
  select.replaceChildren(...report.submissions.map((sub, i) => new Option(
    `${sub.contestant} / ${sub.test}: ${sub.accepted} of ${sub.total}`, String(i))));
  $("grading").hidden = false;
  renderCases();
}

const COLUMNS = [["rank", "Rank"], ["contestant", "Contestant"], ["score", "Score"],
  ["accepted", "Accepted"]];

function renderScoreboard() {
  const rows = state.report.scoreboard.map((line, i) => ({ rank: i + 1, ...line }));
  const tests = rows.length ? Object.keys(rows[0].tests) : [];
  const head = $("scoreboard").tHead.rows[0];
  head.replaceChildren();
  for (const [key, title] of [...COLUMNS, ...tests.map((t) => [`test:${t}`, t])]) {
    const th = document.createElement("th");
    th.scope = "col";
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = title;
    button.addEventListener("click", () => sortBy(key));
    th.appendChild(button);
    if (state.sort.key === key) th.setAttribute("aria-sort", state.sort.ascending ? "ascending" : "descending");
    head.appendChild(th);
  }
  const value = (row, key) => (key.startsWith("test:") ? row.tests[key.slice(5)] : row[key]);
  rows.sort((a, b) => {
    const x = value(a, state.sort.key);
    const y = value(b, state.sort.key);
    const order = typeof x === "string" ? x.localeCompare(y) : x - y;
    return state.sort.ascending ? order : -order;
  });
  $("scoreboard").tBodies[0].replaceChildren(...rows.map((row) => {
    const tr = document.createElement("tr");
    cell(tr, row.rank);
    cell(tr, row.contestant);
    cell(tr, `${row.score} / ${row.max_score}`);
    cell(tr, row.accepted);
    for (const test of tests) cell(tr, row.tests[test]);
    return tr;
  }));
}

function sortBy(key) {
  state.sort = { key, ascending: state.sort.key === key ? !state.sort.ascending : true };
  renderScoreboard();
  const button = [...$("scoreboard").tHead.querySelectorAll("button")].find(
    (b) => b.parentElement.getAttribute("aria-sort"));
  if (button) button.focus();
}

const VERDICTS = {
  A: "AC", W: "WA", P: "PE", M: "MISSING", T: "TLE", L: "MLE", O: "OLE", R: "RE", C: "CE",
  N: "NR",
};

// Every case of a report's submission: version 2 keeps a letter per case and the details of
// the first mismatches only; version 1 an object per case.
function casesOf(sub) {
  if (typeof sub.verdicts !== "string") return sub.cases || [];
  const kept = new Map(sub.mismatches.map((m) => [m.index, m]));
  const rows = [...sub.verdicts].map((code, i) => ({
    ...(kept.get(i + 1) || { index: i + 1, verdict: VERDICTS[code] }),
    time: sub.time_ms ? sub.time_ms[i] : undefined,  // a judged program's
    memory: sub.memory_kib ? sub.memory_kib[i] : undefined,
  }));
  const end = sub.verdicts.length + 1;
  if (sub.extra) {
    rows.push(kept.get(end) || { index: end, verdict: "EXTRA", expected: "", found: sub.extra.first });
  }
  return rows;
}

function renderCases() {
  const sub = state.report.submissions[Number($("submission").value || 0)];
  const body = $("cases").tBodies[0];
  if (!sub) {
    body.replaceChildren();
    return;
  }
  const wrongOnly = $("wrong-only").checked;
  const shown = casesOf(sub).filter((c) => !wrongOnly || c.verdict !== "AC").slice(0, 1000);
  body.replaceChildren(...shown.map((c, i) => {
    const tr = document.createElement("tr");
    cell(tr, c.index);
    cell(tr, c.verdict, `verdict-${c.verdict}`);
    cell(tr, c.verdict === "AC" ? "(as found)" : c.expected ?? "(not kept)", "word");
    cell(tr, c.verdict === "MISSING" ? "end of file" : c.found ?? "", "word");
    const input = cell(tr, c.input ?? "…", "input");
    if (c.input == null && c.verdict !== "EXTRA" && i < 50) loadInput(input, sub.test, c.index);
    cell(tr, c.time === undefined ? "" : c.time.toFixed(1));
    cell(tr, c.memory === undefined ? "" : String(c.memory));
    return tr;
  }));
}

// A hack search's report: each contestant's counterexample with its input, expected and found.
async function showHacks(grading) {
  const report = await (await api(grading.links["report.json"])).json();
  $("hacks").tBodies[0].replaceChildren(...report.contestants.map((c) => {
    const tr = document.createElement("tr");
    cell(tr, c.contestant);
    const result = c.hacked ? `hacked: ${c.verdict}` : c.skipped ? `not searched: ${c.skipped}` : "not hacked";
    cell(tr, result, c.hacked ? `verdict-${c.verdict}` : "");
    cell(tr, c.expected ?? "", "word");
    cell(tr, c.found ?? "", "word");
    cell(tr, c.input ?? "", "input");
    cell(tr, c.cases_tried);
    return tr;
  }));
  $("grading").hidden = true;
  $("hack").hidden = false;
}

async function loadInput(target, test, index) {
  try {
    const path = `/v1/gradings/${encodeURIComponent(state.grading)}/cases/${encodeURIComponent(test)}/${index}`;
    const response = await api(path);
    target.textContent = (await response.json()).input;
  } catch (_) {
    target.textContent = "";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("token").value = state.token;
  $("token-form").addEventListener("submit", useToken);
  $("solve-form").addEventListener("submit", solveFiles);
  $("grade-form").addEventListener("submit", gradeArchive);
  $("hack-button").addEventListener("click", hackArchive);
  $("submission").addEventListener("change", renderCases);
  $("wrong-only").addEventListener("change", renderCases);
  $("recent").addEventListener("change", showRecent);
  start();
});
