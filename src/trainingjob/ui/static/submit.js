// Submit a TrainingJob from YAML, or from a small form that writes the YAML for you.
import { el, api, confirmAction, showResult } from "./common.js";

const FRAMEWORKS = ["pytorch", "tensorflow", "xgboost", "jax", "mpi"];
const EXAMPLE = `apiVersion: ml.example.com/v1alpha1
kind: TrainingJob
metadata:
  name: mnist
  namespace: default
spec:
  framework: pytorch
  image: registry.example/train:1
  command: ["python", "train.py"]
  workers: 2
`;

function quote(value) { return JSON.stringify(String(value)); }

// With a runtime (a ClusterTrainingRuntime's name, docs/runtimes.md), image and command may be left empty: the
// runtime's apply, and what is filled in overrides them.
function manifestFromForm(fields) {
  const command = fields.command.value.trim().split(/\s+/).filter(Boolean);
  const image = fields.image.value.trim();
  const runtime = fields.runtime.value.trim();
  const lines = [
    "apiVersion: ml.example.com/v1alpha1", "kind: TrainingJob", "metadata:",
    `  name: ${quote(fields.name.value.trim())}`, `  namespace: ${quote(fields.namespace.value.trim() || "default")}`,
    "spec:", `  framework: ${fields.framework.value}`,
  ];
  if (runtime) lines.push(`  runtimeRef: {name: ${quote(runtime)}}`);
  if (image || !runtime) lines.push(`  image: ${quote(image)}`);
  if (command.length || !runtime) lines.push(`  command: [${command.map(quote).join(", ")}]`);
  lines.push(`  workers: ${Number(fields.workers.value)}`);
  if (Number(fields.gpus.value) > 0) lines.push(`  gpuPerWorker: ${Number(fields.gpus.value)}`);
  return lines.join("\n") + "\n";
}

export function showSubmit(main) {
  const result = el("div", { "data-testid": "result" });
  const yaml = el("textarea", { "data-testid": "yaml", spellcheck: "false" });
  yaml.value = EXAMPLE;
  const fields = {
    name: el("input", { "data-testid": "form-name", value: "mnist" }),
    namespace: el("input", { "data-testid": "form-namespace", value: "default" }),
    framework: el("select", { "data-testid": "form-framework" }, FRAMEWORKS.map((f) => el("option", { value: f }, f))),
    runtime: el("input", { "data-testid": "form-runtime", value: "", placeholder: "ClusterTrainingRuntime (optional)" }),
    image: el("input", { "data-testid": "form-image", value: "registry.example/train:1" }),
    command: el("input", { "data-testid": "form-command", value: "python train.py" }),
    workers: el("input", { type: "number", min: "1", value: "2", "data-testid": "form-workers" }),
    gpus: el("input", { type: "number", min: "0", value: "0", "data-testid": "form-gpus" }),
  };
  const submit = async (text) => {
    if (!(await confirmAction("Create TrainingJob", "Create this TrainingJob?", text))) return;
    const response = await api("POST", "/api/trainingjobs", { manifest: text });
    const created = response.body?.metadata;
    showResult(result, response, created ? `created ${created.namespace}/${created.name}` : "created");
    if (response.ok) result.append(el("a", { href: `#/jobs/${created.namespace}/${created.name}`, "data-testid": "created-link" }, "open the job"));
  };
  const yamlPane = el("div", {}, yaml, el("div", { class: "actions" },
    el("button", { class: "primary", "data-testid": "submit-yaml", onclick: () => submit(yaml.value) }, "Create")));
  const formPane = el("div", { hidden: true },
    el("div", { class: "form-grid" }, Object.entries({
      Name: fields.name, Namespace: fields.namespace, Framework: fields.framework, Runtime: fields.runtime, Image: fields.image,
      Command: fields.command, Workers: fields.workers, "GPUs per worker": fields.gpus,
    }).flatMap(([label, input]) => [el("label", {}, label), input])),
    el("div", { class: "actions" },
      el("button", { "data-testid": "form-to-yaml", onclick: () => { yaml.value = manifestFromForm(fields); tab(0); } }, "Edit as YAML"),
      el("button", { class: "primary", "data-testid": "submit-form", onclick: () => submit(manifestFromForm(fields)) }, "Create")));
  const tabs = [el("button", { "data-testid": "tab-yaml" }, "YAML"), el("button", { "data-testid": "tab-form" }, "Form")];
  const tab = (index) => {
    tabs.forEach((b, i) => b.classList.toggle("active", i === index));
    yamlPane.hidden = index !== 0;
    formPane.hidden = index !== 1;
  };
  tabs.forEach((b, i) => b.addEventListener("click", () => tab(i)));
  tab(0);
  main.replaceChildren(el("h2", {}, "Submit a TrainingJob"), el("div", { class: "actions tabs" }, tabs), yamlPane, formPane, result);
  return () => {};
}
