// One job: summary, actions, curves (Chart.js), conditions, workers, checkpoints, Events and worker logs.
// Everything arrives on one event stream; the job object is re-rendered on each change, charts grow in place.
import { el, age, api, confirmAction, duration, EventStream, followPositions, number, phaseBadge, positionText, progressBar, showResult, simulatedBadge, waitedSeconds } from "./common.js";
import { showLog } from "./logs.js";

const COLORS = ["#2457c5", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285"];

function makeChart(canvas, xTitle, yTitle, xTicks) {
  return new window.Chart(canvas, {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
      scales: {
        x: { type: "linear", title: { display: true, text: xTitle }, ticks: xTicks },
        y: { title: { display: true, text: yTitle } },
      },
      plugins: { legend: { position: "bottom" } },
      elements: { point: { radius: 2 } },
    },
  });
}

class Curves {
  constructor(box) {
    this.start = null;
    this.progressCanvas = el("canvas", { "data-testid": "progress-chart" });
    this.metricsCanvas = el("canvas", { "data-testid": "metrics-chart" });
    this.note = el("p", { class: "muted", "data-testid": "no-progress" },
      "No progress reported yet: the curves grow as the job's status.progress changes while this UI is running.");
    box.replaceChildren(
      el("div", {}, el("h3", {}, "Progress over time"), this.note, el("div", { class: "chart-box" }, this.progressCanvas)),
      el("div", {}, el("h3", {}, "Metrics per epoch"), el("div", { class: "chart-box" }, this.metricsCanvas)));
    this.progress = makeChart(this.progressCanvas, "time since the first report", "percent", { callback: (v) => duration(v), precision: 0 });
    this.progress.data.datasets.push({ label: "progress %", data: [], borderColor: COLORS[0], backgroundColor: COLORS[0] });
    this.metrics = makeChart(this.metricsCanvas, "epoch (or step)", "value", { precision: 0 });
    this.count = 0;
  }

  add(point, update = true) {
    const time = Date.parse(point.time);
    if (this.start === null && !Number.isNaN(time)) this.start = time;
    if (typeof point.percent === "number" && this.start !== null) {
      this.progress.data.datasets[0].data.push({ x: (time - this.start) / 1000, y: point.percent });
    }
    const x = point.epoch ?? point.step ?? this.count;
    for (const [name, value] of Object.entries(point.metrics || {})) {
      let dataset = this.metrics.data.datasets.find((d) => d.label === name);
      if (!dataset) {
        const color = COLORS[this.metrics.data.datasets.length % COLORS.length];
        dataset = { label: name, data: [], borderColor: color, backgroundColor: color };
        this.metrics.data.datasets.push(dataset);
      }
      dataset.data.push({ x, y: value });
    }
    this.count += 1;
    this.note.hidden = true;
    if (update) this.redraw();
  }

  redraw() { this.progress.update("none"); this.metrics.update("none"); }
  destroy() { this.progress.destroy(); this.metrics.destroy(); }
}

function table(headers, rows, testid) {
  if (!rows.length) return el("p", { class: "muted", "data-testid": testid }, "none");
  return el("table", { "data-testid": testid },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))));
}

// "2 running / 3 wanted"; a finished job wants none, so only the workers still running (cleanPodPolicy None).
function workersText(job) {
  const running = (job.status?.workerStatuses || []).filter((w) => w.phase === "Running").length;
  if (!finishedPhase(job)) return `${running} running / ${job.spec?.workers} wanted`;
  return running ? `${running} still running` : "none running";
}

// The job's queue rows while it goes through Kueue: the queues, the place while waiting, the time waited, the reason.
function queueItems(job, place) {
  const queue = job.status?.queue;
  if (!queue) return [];
  const waiting = !queue.admitted && !finishedPhase(job);
  return [
    ["Queue", el("span", { "data-testid": "job-queue" }, `LocalQueue ${queue.name} → ClusterQueue ${place?.clusterQueue || queue.clusterQueue || "?"}`)],
    ...(waiting ? [["Position", el("span", { "data-testid": "job-position" }, positionText(place) || "reading…")]] : []),
    ["Queued for", el("span", { "data-testid": "job-queued-for" }, duration(waitedSeconds(queue)))],
    ["Queue state", `${queue.reason || ""}${queue.message ? ": " + queue.message : ""}`],
  ];
}

function summary(job, place) {
  const spec = job.spec || {}, status = job.status || {}, progress = status.progress || {};
  const items = [
    ["Phase", el("span", {}, phaseBadge(status.phase || "Pending"), status.simulated ? simulatedBadge() : "")],
    ["Progress", progressBar(progress.percent)],
    ["Epoch", progress.epoch !== undefined ? `${progress.epoch}/${progress.totalEpochs ?? "?"}` : "—"],
    ["Step", progress.step !== undefined ? `${progress.step}/${progress.totalSteps ?? "?"}` : "—"],
    ["ETA", el("span", { "data-testid": "job-eta" }, progress.estimatedRemainingSeconds !== undefined ? duration(progress.estimatedRemainingSeconds) : (status.phase === "Running" && progress.percent !== undefined && progress.percent < 100 ? "unknown" : "—"))],
    ["Metrics", Object.entries(progress.metrics || {}).map(([k, v]) => `${k}=${number(v)}`).join("  ") || "—"],
    ["Workers", el("span", { "data-testid": "job-workers" }, workersText(job))],
    ["Framework", spec.framework], ["Image", spec.image],
    ["Attempt", `${status.attempt ?? 0} · restarts ${status.restartCount ?? 0} · disruptions ${status.disruptionCount ?? 0}`],
    ...queueItems(job, place),
    ["Message", status.message || "—"],
    ["Created", `${job.metadata.creationTimestamp} (${age(job.metadata.creationTimestamp)} ago)`],
  ];
  return el("dl", { class: "summary" }, items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// The checkpoints reported, newest first; with checkpoint.keepLast only that many, as the training code prunes the
// rest: listing them would offer checkpoints that are gone.
function checkpointRows(job, points) {
  const seen = new Map();
  for (const p of points) if (p.checkpoint?.path) seen.set(p.checkpoint.path, p.checkpoint);
  const last = job.status?.lastCheckpoint;
  if (last?.path) seen.set(last.path, last);
  const keep = job.spec?.checkpoint?.keepLast;
  const rows = [...seen.values()].reverse().map((c) => [c.path, c.epoch ?? "", c.step ?? "", c.time ?? ""]);
  return keep ? rows.slice(0, keep) : rows;
}

const FINISHED = ["Succeeded", "Failed"];

function finishedPhase(job) {
  const phase = job.status?.phase;
  return FINISHED.includes(phase) ? phase : null;
}

// `draft` holds what the user typed into the scale box until a scale goes through: the job is re-rendered on every
// change of its status, and a progress report must not wipe a number being typed. A finished job ignores spec
// changes, so it is offered Delete alone, with the reason; the outcome of an action shows right beside its buttons.
function actions(job, resultBox, draft) {
  const { namespace, name } = job.metadata;
  const base = `/api/namespaces/${encodeURIComponent(namespace)}/trainingjobs/${encodeURIComponent(name)}`;
  const run = async (title, text, call, success) => {
    if (!(await confirmAction(title, text))) return;
    showResult(resultBox, await call(), success);
  };
  const remove = el("button", { class: "danger", "data-testid": "delete", onclick: () => run("Delete job",
    `Delete ${namespace}/${name}? Its workers, Service and ConfigMap are deleted with it.`,
    () => api("DELETE", base), "delete requested") }, "Delete");
  const finished = finishedPhase(job);
  if (finished) {
    return el("div", { class: "actions" }, remove, el("span", { class: "muted", "data-testid": "finished-note" },
      `This job has ${finished.toLowerCase()}: suspend, resume and scale change nothing any more. Submit it again to run it again.`), resultBox);
  }
  const suspended = !!job.spec?.suspend;
  const workers = el("input", { type: "number", min: "1", value: draft.workers ?? job.spec?.workers ?? 1,
    "data-testid": "scale-input", oninput: () => { draft.workers = workers.value; } });
  const scale = async () => {
    const result = await api("POST", `${base}/scale`, { workers: Number(workers.value) });
    if (result.ok) draft.workers = null;
    return result;
  };
  return el("div", { class: "actions" },
    el("button", { "data-testid": suspended ? "resume" : "suspend", onclick: () => run(
      suspended ? "Resume job" : "Suspend job",
      suspended ? `Resume ${namespace}/${name}? Its workers are created again.` : `Suspend ${namespace}/${name}? Its workers are deleted; Service, ConfigMap and checkpoints stay.`,
      () => api("POST", `${base}/suspend`, { suspend: !suspended }),
      suspended ? "resume requested" : "suspend requested") }, suspended ? "Resume" : "Suspend"),
    el("span", {}, "Workers ", workers,
      el("button", { "data-testid": "scale", onclick: () => run("Scale job",
        `Scale ${namespace}/${name} to ${workers.value} worker(s)? The gang restarts with the new size.`,
        scale, `scaled to ${workers.value}`) }, "Scale")),
    remove, resultBox);
}

export function showJob(main, namespace, name) {
  const state = { job: null, points: [], events: new Map(), curves: null, log: null, place: null };
  // The actions are rebuilt only when what they show changes (suspended or not, spec.workers, finished), so a status update
  // neither blurs the scale box nor drops what was typed into it (`draft`).
  const draft = { workers: null };
  const actionsBox = el("div"), summaryBox = el("div");
  let actionsShown = null;
  const head = el("div", {}, actionsBox, summaryBox);
  const resultBox = el("div", { "data-testid": "result" });
  const curveBox = el("div", { class: "grid" });
  const details = el("div");
  const eventsBox = el("div");
  const logBox = el("div");
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← all jobs")),
    el("h2", {}, `${namespace}/${name}`), head,
    el("section", { class: "card" }, curveBox), details,
    el("section", { class: "card" }, el("h3", {}, "Events"), eventsBox),
    el("section", { class: "card" }, el("h3", {}, "Worker logs"), logBox));
  state.curves = new Curves(curveBox);

  const renderJob = () => {
    const job = state.job, status = job.status || {};
    const shown = JSON.stringify([!!job.spec?.suspend, job.spec?.workers, finishedPhase(job)]);
    if (shown !== actionsShown) {
      actionsBox.replaceChildren(actions(job, resultBox, draft));
      actionsShown = shown;
    }
    summaryBox.replaceChildren(el("section", { class: "card", "data-testid": "summary" }, summary(job, state.place)));
    details.replaceChildren(
      el("section", { class: "card" }, el("h3", {}, "Workers"), table(["Worker", "Pod", "Phase", "Restarts", "Exit code", "Reason", "Node"],
        (status.workerStatuses || []).map((w) => [w.workerId, w.podName, w.phase, w.restartCount ?? 0, w.exitCode ?? "", w.reason ?? "", w.nodeName ?? ""]), "workers-table")),
      el("section", { class: "card" }, el("h3", {}, "Conditions"), table(["Type", "Status", "Reason", "Message", "Last transition"],
        (status.conditions || []).map((c) => [c.type, c.status, c.reason, c.message, c.lastTransitionTime]), "conditions-table")),
      el("section", { class: "card" }, el("h3", {}, "Checkpoints"), table(["Path", "Epoch", "Step", "Time"],
        checkpointRows(job, state.points), "checkpoints-table")),
      el("section", { class: "card" }, el("h3", {}, "Spec"), el("pre", { "data-testid": "spec" }, JSON.stringify(job.spec, null, 2))));
    if (!state.log) state.log = showLog(logBox, namespace, status.workerStatuses || [], job.spec?.workers ?? 1, name);
    else state.log.updateWorkers(status.workerStatuses || []);
  };
  const renderEvents = () => {
    const rows = [...state.events.values()]
      .sort((a, b) => (a.lastTimestamp || a.eventTime || "").localeCompare(b.lastTimestamp || b.eventTime || ""))
      .map((e) => [e.type, e.reason, e.message, e.count ?? 1, e.lastTimestamp || e.eventTime || ""]);
    eventsBox.replaceChildren(table(["Type", "Reason", "Message", "Count", "Last seen"], rows, "events-table"));
  };

  const source = new EventStream(`/api/namespaces/${encodeURIComponent(namespace)}/trainingjobs/${encodeURIComponent(name)}/stream`);
  source.addEventListener("job", (e) => { state.job = JSON.parse(e.data); renderJob(); });
  source.addEventListener("history", (e) => {
    state.curves.destroy();
    state.curves = new Curves(curveBox);
    state.points = JSON.parse(e.data);
    for (const p of state.points) state.curves.add(p, false);
    state.curves.redraw();
    state.events.clear();
  });
  source.addEventListener("point", (e) => { const p = JSON.parse(e.data); state.points.push(p); state.curves.add(p); });
  source.addEventListener("event", (e) => { const ev = JSON.parse(e.data); state.events.set(ev.metadata.uid, ev); renderEvents(); });
  source.addEventListener("events-error", (e) => {
    eventsBox.replaceChildren(el("div", { class: "alert error" }, `cannot read Events: ${JSON.parse(e.data).message}`));
  });
  source.addEventListener("deleted", () => {
    head.replaceChildren(el("div", { class: "alert warning", "data-testid": "gone" }, "This job has been deleted."));
    source.close();
  });
  source.addEventListener("missing", (e) => {
    head.replaceChildren(el("div", { class: "alert error", "data-testid": "missing" }, JSON.parse(e.data).message));
    source.close();
  });
  // Fell behind: start over with a fresh snapshot (the router rebuilds the page).
  source.addEventListener("resync", () => { source.close(); window.dispatchEvent(new HashChangeEvent("hashchange")); });
  renderEvents();
  const query = `?namespace=${encodeURIComponent(namespace)}&name=${encodeURIComponent(name)}`;
  const waiting = () => !!state.job?.status?.queue && !state.job.status.queue.admitted && !finishedPhase(state.job);
  const stopPositions = followPositions(query, waiting, (rows) => { state.place = rows[0] || null; if (state.job) renderJob(); });
  return () => { source.close(); stopPositions(); state.curves.destroy(); state.log?.stop(); };
}
