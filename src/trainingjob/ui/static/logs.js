// Worker logs streamed like `kubectl logs -f`: the UI server follows the trainer container's log through the
// API server and forwards it over an event stream. When the API server cannot get a log (no such pod yet, or a
// node that serves none, like kwok's), its message is shown as it is. A worker whose pod was deleted (a finished
// job's cleanup) has no log left: the picker marks it gone and Show says so instead of asking for it.
import { el, errorText, EventStream } from "./common.js";

const GONE = "Deleted";

const MAX_CHARS = 400000; // keep the page responsive on chatty workers: the oldest output is dropped first

export function showLog(box, namespace, workerStatuses, workers, job) {
  const picker = el("select", { "data-testid": "log-worker" });
  const follow = el("input", { type: "checkbox", checked: true, "data-testid": "log-follow" });
  const output = el("pre", { class: "log", "data-testid": "log-output" });
  const state = el("div", { "data-testid": "log-state", class: "muted" }, "Pick a worker and press Show.");
  let source = null;

  let gone = new Set();
  const fillPicker = (statuses) => {
    const chosen = picker.value;
    gone = new Set(statuses.filter((w) => w.phase === GONE).map((w) => w.podName));
    const label = (w) => `worker ${w.workerId} (${w.podName}, ${w.phase === GONE ? "pod deleted, no log" : w.phase})`;
    const pods = statuses.length ? statuses.map((w) => [w.podName, label(w)])
      : Array.from({ length: workers }, (_, i) => [`${job}-worker-${i}`, `worker ${i} (${job}-worker-${i})`]);
    picker.replaceChildren(...pods.map(([pod, label]) => el("option", { value: pod }, label)));
    if (pods.some(([pod]) => pod === chosen)) picker.value = chosen;
  };

  const stop = () => { source?.close(); source = null; };
  const start = () => {
    stop();
    output.textContent = "";
    const pod = picker.value;
    if (gone.has(pod)) {
      state.replaceChildren(el("div", { class: "alert warning", "data-testid": "log-gone" },
        `${pod} is gone: its pod was deleted after the job finished, and its log went with it.`));
      return;
    }
    state.textContent = `streaming the log of ${pod}…`;
    const query = new URLSearchParams({ follow: follow.checked ? "1" : "0", tailLines: "2000" });
    source = new EventStream(`/api/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/log?${query}`);
    source.addEventListener("chunk", (e) => {
      output.textContent = (output.textContent + JSON.parse(e.data)).slice(-MAX_CHARS);
      output.scrollTop = output.scrollHeight;
    });
    source.addEventListener("end", () => {
      stop();
      state.textContent = output.textContent ? `end of the log of ${pod}` : `${pod} has written no output`;
    });
    source.addEventListener("failure", (e) => {
      stop();
      const body = JSON.parse(e.data);
      if (body.status === 404 && body.reason === "NotFound") {
        state.replaceChildren(el("div", { class: "alert warning", "data-testid": "log-gone" },
          `${pod} is gone (${body.message}): a deleted pod's log goes with it.`));
        return;
      }
      state.replaceChildren(el("div", { class: "alert error", "data-testid": "log-error" },
        `The API server could not return the log of ${pod}: ${errorText(body, 0)}`));
    });
    source.onerror = () => { if (source) { stop(); state.textContent = "the log stream was interrupted; press Show again"; } };
  };

  fillPicker(workerStatuses);
  box.replaceChildren(
    el("div", { class: "actions" }, "Worker ", picker, el("label", {}, follow, " follow"),
      el("button", { onclick: start, "data-testid": "log-show" }, "Show"), el("button", { onclick: () => { stop(); state.textContent = "stopped"; } }, "Stop")),
    state, output);
  return { stop, updateWorkers: fillPicker };
}
