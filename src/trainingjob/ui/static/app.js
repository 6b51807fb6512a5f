// The page shell: the live job list (one event stream on /api/stream for the whole session) and a hash router.
import { el, age, authHeaders, duration, EventStream, followPositions, number, phaseBadge, progressBar, queueCell, showSignIn, simulatedBadge, takeToken } from "./common.js";
import { showJob } from "./job.js";
import { showSubmit } from "./submit.js";
import { showSweep, showSweeps } from "./sweeps.js";

const jobs = new Map(); // "ns/name" -> summary row
const places = new Map(); // "ns/name" -> the waiting job's place in Kueue's queues (/api/queue-positions)
let watchState = { synced: false, scope: null, problem: null };
let leavePage = () => {};
let renderQueued = false;

function keyOf(row) { return `${row.namespace}/${row.name}`; }

function connectList() {
  const source = new EventStream("/api/stream");
  source.addEventListener("snapshot", (e) => {
    jobs.clear();
    for (const row of JSON.parse(e.data)) jobs.set(keyOf(row), row);
    queueListRender();
  });
  source.addEventListener("upsert", (e) => { const row = JSON.parse(e.data); jobs.set(keyOf(row), row); queueListRender(); });
  source.addEventListener("delete", (e) => { jobs.delete(keyOf(JSON.parse(e.data))); queueListRender(); });
  source.addEventListener("watch", (e) => { watchState = JSON.parse(e.data); showBanner(); queueListRender(); });
  source.addEventListener("resync", () => source.close() || setTimeout(connectList, 500));
  source.onerror = () => {
    watchState = { ...watchState, problem: "lost the connection to the UI server; reconnecting…" };
    showBanner();
  };
  source.onopen = () => { if (watchState.problem?.startsWith("lost the connection")) { watchState.problem = null; showBanner(); } };
}

function showBanner() {
  const banner = document.getElementById("banner");
  banner.textContent = watchState.problem || "";
  banner.hidden = !watchState.problem;
}

function queueListRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; if (currentRoute().page === "list") renderList(); });
}

function scopeText() {
  if (!watchState.synced) return "loading…";
  if (!watchState.scope) return "all namespaces";
  const why = watchState.fallback ? " (you may not list TrainingJobs in all namespaces)" : "";
  return `namespace ${watchState.scope.join(", ")}${why}`;
}

function renderList() {
  const main = document.getElementById("main");
  const filter = main.querySelector("#filter")?.value ?? "";
  const rows = [...jobs.values()]
    .filter((row) => !filter || keyOf(row).includes(filter))
    .sort((a, b) => (b.created || "").localeCompare(a.created || "") || keyOf(a).localeCompare(keyOf(b)));
  const body = el("tbody", {}, rows.map((row) => el("tr", {
    class: "job-row", "data-job": keyOf(row), onclick: () => { location.hash = `#/jobs/${row.namespace}/${row.name}`; },
  },
    el("td", {}, row.namespace),
    el("td", {}, el("a", { href: `#/jobs/${row.namespace}/${row.name}` }, row.name)),
    el("td", {}, row.framework),
    el("td", { "data-testid": "workers" }, `${row.running}/${row.workers}`),
    el("td", {}, phaseBadge(row.deleting ? "Deleting" : row.phase), row.simulated ? simulatedBadge() : ""),
    el("td", {}, progressBar(row.percent)),
    el("td", {}, row.epoch !== undefined && row.epoch !== null ? `${row.epoch}/${row.totalEpochs ?? "?"}` : ""),
    el("td", {}, Object.entries(row.metrics).map(([k, v]) => `${k}=${number(v)}`).join(" ")),
    el("td", { "data-testid": "eta" }, row.etaSeconds !== undefined && row.etaSeconds !== null ? duration(row.etaSeconds) : (row.phase === "Running" && row.percent !== null && row.percent < 100 ? "unknown" : "")),
    el("td", {}, row.restarts || ""),
    el("td", {}, queueCell(row.queue, places.get(keyOf(row)))),
    el("td", {}, age(row.created)),
  )));
  const table = el("table", { "data-testid": "job-table" },
    el("thead", {}, el("tr", {}, ["Namespace", "Name", "Framework", "Workers", "Phase", "Progress", "Epoch",
      "Metrics", "ETA", "Restarts", "Queue", "Age"].map((h) => el("th", {}, h)))),
    body);
  const existing = main.querySelector("#job-list");
  const content = el("div", { id: "job-list" },
    el("p", { class: "muted", "data-testid": "scope" }, `${rows.length} job(s) · ${scopeText()} · live`),
    rows.length ? table : el("p", { class: "muted", "data-testid": "empty" }, watchState.synced ? "No TrainingJobs." : "Loading…"));
  if (existing) { existing.replaceWith(content); return; }
  main.replaceChildren(
    el("h2", {}, "TrainingJobs"),
    el("input", { id: "filter", placeholder: "filter namespace/name", oninput: renderList, value: filter }),
    content);
}

function waitingRow(row) {
  return row.queue && !row.queue.admitted && !["Succeeded", "Failed"].includes(row.phase);
}

// Positions move without any change to the jobs, so the list asks for them while it shows a waiting job.
function followListPositions() {
  followPositions("", () => currentRoute().page === "list" && [...jobs.values()].some(waitingRow), (rows) => {
    places.clear();
    for (const place of rows) places.set(keyOf(place), place);
    queueListRender();
  });
}

function currentRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "jobs" && parts.length === 3) return { page: "job", namespace: parts[1], name: parts[2] };
  if (parts[0] === "submit") return { page: "submit" };
  if (parts[0] === "sweeps" && parts.length === 3) return { page: "sweep", namespace: parts[1], name: parts[2] };
  if (parts[0] === "sweeps") return { page: "sweeps" };
  return { page: "list" };
}

function route() {
  leavePage();
  leavePage = () => {};
  const where = currentRoute();
  const main = document.getElementById("main");
  main.replaceChildren();
  if (where.page === "job") leavePage = showJob(main, where.namespace, where.name);
  else if (where.page === "submit") leavePage = showSubmit(main);
  else if (where.page === "sweeps") leavePage = showSweeps(main);
  else if (where.page === "sweep") leavePage = showSweep(main, where.namespace, where.name);
  else renderList();
}

async function showIdentity() {
  const response = await fetch("/api/whoami", { headers: authHeaders() });
  const box = document.getElementById("identity");
  if (!response.ok) {
    box.textContent = "not signed in: open the URL `tj ui` printed";
    if (response.status === 401) showSignIn();
    return;
  }
  const who = await response.json();
  box.textContent = `acting as ${who.user || "your kubeconfig user"} · ${who.server}`;
}

takeToken();
window.addEventListener("hashchange", route);
showIdentity();
connectList();
followListPositions();
route();
