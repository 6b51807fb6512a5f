// TrainingSweeps: the list, and one sweep (its trials, best trial, objective over trials, a parameter against the
// objective). Read from /api/trainingsweeps every REFRESH_MS while the page is open (ui/sweeps.py says why not a
// watch). Every name, value, reason and message comes from users or trials: shown as text only (el()), and links
// are built from encoded names.
import { el, age, api, errorText, number, phaseBadge } from "./common.js";

const REFRESH_MS = 3000;
const STATE_CLASSES = { Succeeded: "Succeeded", Failed: "Failed", Pruned: "Suspended", Running: "Running" };

function jobLink(namespace, name) {
  return `#/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function sweepLink(namespace, name) {
  return `#/sweeps/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function valueText(value) {
  return value === undefined || value === null ? "—" : number(value);
}

function parametersText(parameters) {
  return Object.entries(parameters || {}).map(([k, v]) => `${k}=${number(v)}`).join("  ");
}

// Call `load` now and every REFRESH_MS until the returned stop function is called; `show` gets each answer.
function poll(load, show) {
  let stopped = false;
  const tick = async () => {
    if (stopped) return;
    const result = await load();
    if (!stopped) show(result);
    if (!stopped) setTimeout(tick, REFRESH_MS);
  };
  tick();
  return () => { stopped = true; };
}

export function showSweeps(main) {
  const box = el("div", { "data-testid": "sweep-list" }, el("p", { class: "muted" }, "Loading…"));
  main.replaceChildren(el("h2", {}, "TrainingSweeps"), box);
  return poll(() => api("GET", "/api/trainingsweeps"), (result) => {
    if (!result.ok) { box.replaceChildren(el("div", { class: "alert error" }, errorText(result.body, result.status))); return; }
    if (!result.body.length) { box.replaceChildren(el("p", { class: "muted", "data-testid": "no-sweeps" }, "No TrainingSweeps.")); return; }
    box.replaceChildren(el("table", { "data-testid": "sweep-table" },
      el("thead", {}, el("tr", {}, ["Namespace", "Name", "Phase", "Done", "Running", "Pruned", "Failed", "Max", "Objective", "Best", "Age"].map((h) => el("th", {}, h)))),
      el("tbody", {}, result.body.map((s) => el("tr", { class: "job-row", "data-sweep": `${s.namespace}/${s.name}` },
        el("td", {}, s.namespace),
        el("td", {}, el("a", { href: sweepLink(s.namespace, s.name) }, s.name)),
        el("td", {}, phaseBadge(s.phase)),
        el("td", {}, s.done), el("td", {}, s.running), el("td", {}, s.pruned), el("td", {}, s.failed),
        el("td", {}, s.maxTrials ?? ""),
        el("td", {}, `${s.direction} ${s.metric ?? ""}`),
        el("td", { "data-testid": "sweep-best" }, s.best ? `${valueText(s.best.value)} (${s.best.name})` : "—"),
        el("td", {}, age(s.created)))))));
  });
}

class Plots {
  constructor(box) {
    this.select = el("select", { "data-testid": "parameter-select", onchange: () => this.draw(this.trials) });
    this.overTrials = el("canvas", { "data-testid": "objective-chart" });
    this.versus = el("canvas", { "data-testid": "parameter-chart" });
    box.replaceChildren(
      el("div", {}, el("h3", {}, "Objective over trials"), el("div", { class: "chart-box" }, this.overTrials)),
      el("div", {}, el("h3", {}, "Parameter against objective "), this.select, el("div", { class: "chart-box" }, this.versus)));
    const scatter = (canvas, x) => new window.Chart(canvas, {
      type: "scatter", data: { datasets: [{ label: "objective", data: [], backgroundColor: "#2457c5" }] },
      options: { animation: false, maintainAspectRatio: false, scales: { x: { title: { display: true, text: x } } } },
    });
    this.trialsChart = scatter(this.overTrials, "trial");
    this.versusChart = scatter(this.versus, "value");
    this.trials = [];
  }

  draw(trials) {
    this.trials = trials;
    const scored = trials.filter((t) => typeof t.value === "number");
    this.trialsChart.data.datasets[0].data = scored.map((t) => ({ x: t.index, y: t.value }));
    const names = [...new Set(trials.flatMap((t) => Object.entries(t.parameters || {}).filter(([, v]) => typeof v === "number").map(([k]) => k)))];
    if ([...this.select.options].map((o) => o.value).join() !== names.join()) {
      const chosen = this.select.value;
      this.select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
      if (names.includes(chosen)) this.select.value = chosen;
    }
    const parameter = this.select.value;
    this.versusChart.options.scales.x.title.text = parameter || "value";
    this.versusChart.data.datasets[0].data = scored.filter((t) => typeof t.parameters?.[parameter] === "number")
      .map((t) => ({ x: t.parameters[parameter], y: t.value }));
    this.trialsChart.update("none");
    this.versusChart.update("none");
  }

  destroy() { this.trialsChart.destroy(); this.versusChart.destroy(); }
}

function sweepSummary(sweep) {
  const spec = sweep.spec || {}, status = sweep.status || {}, objective = spec.objective || {};
  const best = status.bestTrial;
  const { namespace } = sweep.metadata;
  const items = [
    ["Phase", phaseBadge(status.phase || "Pending")],
    ["Objective", `${objective.direction || "maximize"} ${objective.metric ?? ""}${objective.goal !== undefined ? `, goal ${number(objective.goal)}` : ""}`],
    ["Algorithm", `${spec.algorithm?.name || "tpe"}, pruner ${spec.earlyStopping?.pruner || "none"}`],
    ["Trials", `${status.trialsDone ?? 0} done, ${status.trialsRunning ?? 0} running, ${status.trialsPruned ?? 0} pruned, ${status.trialsFailed ?? 0} failed, max ${spec.maxTrials ?? "?"}`],
    ["Best trial", el("span", { "data-testid": "best-trial" }, best
      ? [el("a", { href: jobLink(namespace, best.name) }, best.name), ` = ${valueText(best.value)} with ${parametersText(best.parameters)}`]
      : "—")],
    ["Created", `${sweep.metadata.creationTimestamp} (${age(sweep.metadata.creationTimestamp)} ago)`],
  ];
  return el("dl", { class: "summary", "data-testid": "sweep-summary" }, items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function trialTable(sweep) {
  const trials = sweep.status?.trials || [];
  if (!trials.length) return el("p", { class: "muted", "data-testid": "trials-table" }, "No trials yet.");
  const best = sweep.status?.bestTrial?.name;
  const { namespace } = sweep.metadata;
  return el("table", { "data-testid": "trials-table" },
    el("thead", {}, el("tr", {}, ["Trial", "State", "Objective", "Epochs", "Parameters", "Reason"].map((h) => el("th", {}, h)))),
    el("tbody", {}, trials.map((t) => el("tr", { "data-trial": t.name, class: t.name === best ? "best" : "" },
      el("td", {}, el("a", { href: jobLink(namespace, t.name) }, t.name), t.name === best ? " ★" : ""),
      el("td", {}, el("span", { class: `phase phase-${STATE_CLASSES[t.state] || ""}`, "data-testid": "trial-state" }, t.state ?? "")),
      el("td", { "data-testid": "trial-value" }, valueText(t.value)),
      el("td", {}, t.epochs ?? "—"),
      el("td", { "data-testid": "trial-parameters" }, parametersText(t.parameters)),
      el("td", {}, t.reason ?? "")))));
}

export function showSweep(main, namespace, name) {
  const head = el("div"), plotBox = el("div", { class: "grid" }), trialsBox = el("div"), conditionsBox = el("div");
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/sweeps" }, "← all sweeps")),
    el("h2", {}, `${namespace}/${name}`), head,
    el("section", { class: "card" }, plotBox),
    el("section", { class: "card" }, el("h3", {}, "Trials"), trialsBox),
    el("section", { class: "card" }, el("h3", {}, "Conditions"), conditionsBox));
  const plots = new Plots(plotBox);
  const path = `/api/namespaces/${encodeURIComponent(namespace)}/trainingsweeps/${encodeURIComponent(name)}`;
  const stop = poll(() => api("GET", path), (result) => {
    if (!result.ok) {
      head.replaceChildren(el("div", { class: "alert error", "data-testid": "missing" }, errorText(result.body, result.status)));
      return;
    }
    const sweep = result.body;
    head.replaceChildren(el("section", { class: "card" }, sweepSummary(sweep)));
    trialsBox.replaceChildren(trialTable(sweep));
    conditionsBox.replaceChildren(el("table", {},
      el("thead", {}, el("tr", {}, ["Type", "Status", "Reason", "Message"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (sweep.status?.conditions || []).map((c) => el("tr", {},
        el("td", {}, c.type), el("td", {}, c.status), el("td", {}, c.reason ?? ""), el("td", {}, c.message ?? ""))))));
    plots.draw(sweep.status?.trials || []);
  });
  return () => { stop(); plots.destroy(); };
}
