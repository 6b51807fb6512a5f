{{/*
Names are fixed, as in deploy/: workers reach the progress endpoint at https://trainingjob-operator.<namespace>.svc,
the name its certificate is issued for, so the Service (and everything else) is not named after the release.
*/}}
{{- define "tj.name" -}}trainingjob-operator{{- end }}

{{/* Labels every object carries: deploy/'s own label plus Helm's standard ones (the comparison strips those). */}}
{{- define "tj.labels" -}}
app.kubernetes.io/name: {{ include "tj.name" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The operator's pods: the Deployment's selector, the Service's, the PDB's and the anti-affinity's. */}}
{{- define "tj.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tj.name" . }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "tj.serviceAccountSubject" -}}
- kind: ServiceAccount
  name: {{ include "tj.name" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
What the operator may do in the namespaces it watches (deploy/rbac/cluster-role.yaml, whose namespaced rules
deploy/overlays/namespaced repeats per namespace): used by the ClusterRole and by each per-namespace Role.
*/}}
{{- define "tj.namespacedRules" -}}
- apiGroups: ["ml.example.com"]
  resources: ["trainingjobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["ml.example.com"]
  resources: ["trainingjobs/status"]
  verbs: ["patch"]
- apiGroups: ["ml.example.com"]
  resources: ["trainingsweeps"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["ml.example.com"]
  resources: ["trainingsweeps/status"]
  verbs: ["patch"]
- apiGroups: ["ml.example.com"]
  resources: ["trainingruntimes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["ai.example.com"]
  resources: ["llmmodels"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["ai.example.com"]
  resources: ["llmmodels/status"]
  verbs: ["patch"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["scheduling.k8s.io"]
  resources: ["workloads", "podgroups"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["scheduling.x-k8s.io", "scheduling.volcano.sh"]
  resources: ["podgroups"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["resourcequotas", "limitranges"]
  verbs: ["list"]
{{- end }}

{{/* The node of a worker stuck Terminating (force-deleted only when that node is lost): cluster-scoped. */}}
{{- define "tj.nodeRule" -}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get"]
{{- end }}

{{/* ClusterTrainingRuntimes: cluster-scoped, read wherever jobs are watched (docs/runtimes.md). */}}
{{- define "tj.clusterRuntimeRule" -}}
- apiGroups: ["ml.example.com"]
  resources: ["clustertrainingruntimes"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{/* Kueue's ResourceFlavors and WorkloadPriorityClasses: cluster-scoped, read. */}}
{{- define "tj.kueueRule" -}}
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["resourceflavors", "workloadpriorityclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"]
  verbs: ["list", "watch"]
{{- end }}

{{/* The cluster-scoped reviews: TokenReview (progress endpoint) and SubjectAccessReview (admission). */}}
{{- define "tj.tokenReviewRule" -}}
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}
