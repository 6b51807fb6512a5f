// Helpers every page uses: DOM building (text only, never HTML from data), API calls, the confirmation dialog,
// and the way results and the API server's errors are shown.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null || Number.isNaN(seconds)) return "";
  let s = Math.max(0, Math.round(seconds));
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (s >= size) { parts.push(Math.floor(s / size) + unit); s %= size; }
  }
  if (s || !parts.length) parts.push(s + "s");
  return parts.slice(0, 2).join("");
}

export function age(timestamp) {
  return timestamp ? duration((Date.now() - Date.parse(timestamp)) / 1000) : "";
}

export function number(value) {
  if (typeof value !== "number") return String(value ?? "");
  return Number.isInteger(value) ? String(value) : value.toPrecision(4).replace(/\.?0+$/, "");
}

export function phaseBadge(phase) {
  return el("span", { class: `phase phase-${phase}`, "data-testid": "phase" }, phase);
}

export function progressBar(percent) {
  if (percent === null || percent === undefined) return el("span", { class: "muted" }, "—");
  const shown = Math.max(0, Math.min(100, percent));
  return el("span", {},
    el("span", { class: "bar" }, el("span", { style: `width:${shown}%` })),
    el("span", { class: "pct", "data-testid": "percent" }, `${Math.round(shown)}%`));
}

// An API call of the UI server. Resolves to {ok, status, body}; `body` of a failure is the API server's own
// {status, reason, message} (or the UI server's {message} for input it could not send).
export async function api(method, path, body) {
  const options = { method, headers: { "X-TJ-UI": "1" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    return { ok: false, status: 0, body: { message: `the UI server did not answer: ${error}` } };
  }
  let payload = {};
  try { payload = await response.json(); } catch { payload = { message: response.statusText }; }
  return { ok: response.ok, status: response.status, body: payload };
}

export function errorText(body, status) {
  const head = [body.status ?? status, body.reason].filter(Boolean).join(" ");
  return head ? `${head}: ${body.message ?? ""}` : body.message ?? "";
}

// Show an action's outcome in `box`: the API server's message verbatim on failure.
export function showResult(box, result, success) {
  box.replaceChildren();
  if (result.ok) {
    box.append(el("div", { class: "alert ok", "data-testid": "action-ok" }, success));
  } else {
    box.append(el("div", { class: "alert error", role: "alert", "data-testid": "action-error" },
      errorText(result.body, result.status)));
  }
}

export function confirmAction(title, text, detail) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const pre = document.getElementById("confirm-detail");
  pre.textContent = detail || "";
  pre.hidden = !detail;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}
