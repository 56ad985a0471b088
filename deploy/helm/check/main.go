// Command helm-check validates rendered Kubernetes manifests (the output of
// `helm template`) offline, for scripts/deploy-check.sh: there is no
// cluster to ask and the JSON schemas kubeconform would fetch are out of
// reach, so every document is decoded strictly into the typed structs of
// k8s.io/api (the same structs the API server decodes into), then checked
// for the mistakes that still decode. With -schemas it only writes JSON
// schemas for kubeconform, generated from those structs (schemas.go), and
// prints the -schema-location that finds them.
//
//	helm-check [-secrets-rendered [-external NAME,...]] [FILE...]   (no FILE: standard input)
//	helm-check -schemas DIR
//
// Per document: valid YAML without duplicate keys; apiVersion and kind
// known to client-go's scheme (built-in kinds only); no unknown or
// duplicate fields anywhere (strict decoding); metadata.name a DNS name,
// labels valid. Pod templates: the workload's selector matches the
// template's labels; containers named uniquely, with an image; each volume
// has exactly one source; each mount names a volume (or a StatefulSet's
// claim template) at an absolute, unrepeated path; port names valid and
// unique; probes name ports the container has; env names valid, unrepeated,
// and each $(VAR) names a variable defined before it. Services and
// PodDisruptionBudgets select some pod template of the render, and a
// Service's named targetPort is a port of those pods; a StatefulSet's
// serviceName is a Service of the render; ConfigMaps that pods mount are in
// the render unless optional. Secrets: with -secrets-rendered every Secret a
// pod names (volumes, env, imagePullSecrets) must be in the render with the
// keys it asks for, unless optional or named by -external (made outside the
// chart on purpose); otherwise the ones not rendered are listed as what the
// release expects to exist.
//
// Exit status 1 on any finding, 2 on bad usage or unreadable input.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// doc is one decoded document and where it came from.
type doc struct {
	where string // "FILE#N (Kind/name)"
	obj   runtime.Object
	kind  string
	name  string
}

// podTemplate is a pod spec found in a workload, with what checks need.
type podTemplate struct {
	where    string
	labels   map[string]string
	spec     *corev1.PodSpec
	claims   []string // a StatefulSet's volumeClaimTemplates
	selector *metav1.LabelSelector
	hasSel   bool // the kind has a selector (Pod and Job templates need none)
}

// secretRef is a Secret a pod names.
type secretRef struct {
	where, name, key string
	optional         bool
}

type checker struct {
	problems []string
	docs     []doc
}

func (c *checker) fail(where, format string, args ...any) {
	c.problems = append(c.problems, where+": "+fmt.Sprintf(format, args...))
}

func main() {
	secretsRendered := flag.Bool("secrets-rendered", false, "every Secret a pod names must be in the input")
	external := flag.String("external", "", "with -secrets-rendered: comma-separated Secrets made outside the chart")
	extract := flag.String("extract", "", "then print one value of the render: Secret/NAME/KEY or ConfigMap/NAME/KEY")
	envOf := flag.String("env", "", "then print the environment a container would get, NAME=value lines: KIND/NAME/CONTAINER")
	schemas := flag.String("schemas", "", "only write kubeconform's JSON schemas of the built-in kinds into `DIR`, generated from k8s.io/api's types, and print the -schema-location to give it")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: helm-check [-secrets-rendered [-external NAME,...]] [FILE...]")
		fmt.Fprintln(os.Stderr, "       helm-check -schemas DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *schemas != "" {
		if flag.NArg() > 0 {
			flag.Usage()
			os.Exit(2)
		}
		n, err := writeSchemas(*schemas)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helm-check: -schemas:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "helm-check: %d schemas from k8s.io/api %s in %s\n", n, apiVersion(), *schemas)
		fmt.Println(kubeconformLocation(*schemas))
		return
	}
	c := &checker{}
	inputs := flag.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	for _, in := range inputs {
		var r io.Reader = os.Stdin
		name := "stdin"
		if in != "-" {
			f, err := os.Open(in)
			if err != nil {
				fmt.Fprintln(os.Stderr, "helm-check:", err)
				os.Exit(2)
			}
			defer f.Close()
			r, name = f, in
		}
		if err := c.decodeAll(name, r); err != nil {
			fmt.Fprintln(os.Stderr, "helm-check:", err)
			os.Exit(2)
		}
	}
	ext := map[string]bool{}
	for _, n := range strings.Split(*external, ",") {
		ext[strings.TrimSpace(n)] = true
	}
	expected := c.crossCheck(*secretsRendered, ext)

	kinds := map[string]int{}
	for _, d := range c.docs {
		kinds[d.kind]++
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	out := os.Stdout
	if *extract != "" || *envOf != "" {
		out = os.Stderr // stdout is the value asked for
	}
	fmt.Fprintf(out, "helm-check: %d documents (%s)\n", len(c.docs), strings.Join(parts, ", "))
	for _, e := range expected {
		fmt.Fprintln(out, "helm-check: expects to exist beforehand:", e)
	}
	if len(c.problems) > 0 {
		for _, p := range c.problems {
			fmt.Fprintln(os.Stderr, "helm-check: FAIL:", p)
		}
		fmt.Fprintf(os.Stderr, "helm-check: %d problem(s)\n", len(c.problems))
		os.Exit(1)
	}
	switch {
	case *extract != "":
		v, err := c.value(*extract)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helm-check:", err)
			os.Exit(1)
		}
		os.Stdout.Write(v)
	case *envOf != "":
		env, err := c.env(*envOf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helm-check:", err)
			os.Exit(1)
		}
		for _, e := range env {
			fmt.Println(e)
		}
	default:
		fmt.Println("helm-check: OK")
	}
}

var decoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

func (c *checker) decodeAll(name string, r io.Reader) error {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for n := 1; ; n++ {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		where := fmt.Sprintf("%s#%d", name, n)
		// Duplicate keys are an error here (YAMLToJSON would keep the last).
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			c.fail(where, "YAML: %v", err)
			continue
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue // only comments: helm's "# Source:" of an empty template
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			c.fail(where, "not an object: %v", err)
			continue
		}
		if tm.APIVersion == "" || tm.Kind == "" {
			c.fail(where, "apiVersion and kind are required (have %q, %q)", tm.APIVersion, tm.Kind)
			continue
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		if !scheme.Scheme.Recognizes(gvk) {
			c.fail(where, "unknown apiVersion/kind %s %s (not a built-in kind of k8s.io/api %s)", tm.APIVersion, tm.Kind, apiVersion())
			continue
		}
		obj, _, err := decoder.Decode(js, nil, nil)
		if err != nil {
			// Strict: unknown fields, duplicate fields, wrong types. A
			// document with only unknown or duplicate fields is still
			// decoded, and checked further.
			c.fail(where+" ("+tm.Kind+")", "%v", err)
			if !runtime.IsStrictDecodingError(err) || obj == nil {
				continue
			}
		}
		acc, ok := obj.(metav1.Object)
		if !ok {
			c.fail(where, "%s has no metadata", tm.Kind)
			continue
		}
		d := doc{where: fmt.Sprintf("%s (%s/%s)", where, tm.Kind, acc.GetName()), obj: obj, kind: tm.Kind, name: acc.GetName()}
		c.docs = append(c.docs, d)
		c.checkMeta(d, acc)
	}
}

// apiVersion is the version of k8s.io/api this was built with (go.mod).
func apiVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "k8s.io/api" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}

func (c *checker) checkMeta(d doc, m metav1.Object) {
	if m.GetName() == "" {
		c.fail(d.where, "metadata.name is empty")
	} else {
		check := validation.IsDNS1123Subdomain
		if d.kind == "Service" {
			check = validation.IsDNS1035Label
		}
		for _, e := range check(m.GetName()) {
			c.fail(d.where, "metadata.name %q: %s", m.GetName(), e)
		}
	}
	for _, e := range metav1validation.ValidateLabels(m.GetLabels(), field.NewPath("metadata", "labels")) {
		c.fail(d.where, "%v", e)
	}
}

// templates returns the pod templates of the render.
func (c *checker) templates() []podTemplate {
	var out []podTemplate
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			out = append(out, podTemplate{d.where, o.Spec.Template.Labels, &o.Spec.Template.Spec, nil, o.Spec.Selector, true})
		case *appsv1.DaemonSet:
			out = append(out, podTemplate{d.where, o.Spec.Template.Labels, &o.Spec.Template.Spec, nil, o.Spec.Selector, true})
		case *appsv1.ReplicaSet:
			out = append(out, podTemplate{d.where, o.Spec.Template.Labels, &o.Spec.Template.Spec, nil, o.Spec.Selector, true})
		case *appsv1.StatefulSet:
			var claims []string
			for _, t := range o.Spec.VolumeClaimTemplates {
				claims = append(claims, t.Name)
			}
			out = append(out, podTemplate{d.where, o.Spec.Template.Labels, &o.Spec.Template.Spec, claims, o.Spec.Selector, true})
		case *batchv1.Job:
			out = append(out, podTemplate{d.where, o.Spec.Template.Labels, &o.Spec.Template.Spec, nil, nil, false})
		case *batchv1.CronJob:
			out = append(out, podTemplate{d.where, o.Spec.JobTemplate.Spec.Template.Labels, &o.Spec.JobTemplate.Spec.Template.Spec, nil, nil, false})
		case *corev1.Pod:
			out = append(out, podTemplate{d.where, o.Labels, &o.Spec, nil, nil, false})
		}
	}
	return out
}

func (c *checker) crossCheck(secretsRendered bool, external map[string]bool) (expected []string) {
	secrets := map[string]*corev1.Secret{}
	configMaps := map[string]bool{}
	services := map[string]bool{}
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *corev1.Secret:
			secrets[o.Name] = o
		case *corev1.ConfigMap:
			configMaps[o.Name] = true
		case *corev1.Service:
			services[o.Name] = true
		}
	}
	tpls := c.templates()
	var refs []secretRef
	for _, t := range tpls {
		refs = append(refs, c.checkPod(t, configMaps)...)
	}
	for _, d := range c.docs {
		if s, ok := d.obj.(*appsv1.StatefulSet); ok && s.Spec.ServiceName != "" && !services[s.Spec.ServiceName] {
			c.fail(d.where, "serviceName %q is no Service of the render", s.Spec.ServiceName)
		}
	}
	c.checkSelectors(tpls)

	seen := map[string]bool{}
	for _, r := range refs {
		s, ok := secrets[r.name]
		switch {
		case ok && r.key != "":
			if _, in := s.Data[r.key]; !in {
				if _, in := s.StringData[r.key]; !in && !r.optional {
					c.fail(r.where, "Secret %q has no key %q", r.name, r.key)
				}
			}
		case ok, r.optional:
		case secretsRendered && !external[r.name]:
			c.fail(r.where, "Secret %q is not in the render", r.name)
		default:
			e := "Secret " + r.name
			if r.key != "" {
				e += " (key " + r.key + ")"
			}
			if !seen[e] {
				seen[e] = true
				expected = append(expected, e)
			}
		}
	}
	sort.Strings(expected)
	return expected
}

var varRef = regexp.MustCompile(`\$\(([^)]*)\)`)

func (c *checker) checkPod(t podTemplate, configMaps map[string]bool) (refs []secretRef) {
	w := t.where
	if t.hasSel {
		if t.selector == nil {
			c.fail(w, "spec.selector is required")
		} else if sel, err := metav1.LabelSelectorAsSelector(t.selector); err != nil {
			c.fail(w, "spec.selector: %v", err)
		} else if sel.Empty() || !sel.Matches(labels.Set(t.labels)) {
			c.fail(w, "spec.selector %s does not match the template's labels %v", sel, t.labels)
		}
	}
	for _, e := range metav1validation.ValidateLabels(t.labels, field.NewPath("template", "metadata", "labels")) {
		c.fail(w, "%v", e)
	}
	spec := t.spec
	if len(spec.Containers) == 0 {
		c.fail(w, "no containers")
	}
	for _, s := range spec.ImagePullSecrets {
		refs = append(refs, secretRef{w + " imagePullSecrets", s.Name, "", false})
	}

	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		vw := w + " volume " + v.Name
		if volumes[v.Name] {
			c.fail(vw, "volume name used twice")
		}
		volumes[v.Name] = true
		for _, e := range validation.IsDNS1123Label(v.Name) {
			c.fail(vw, "name: %s", e)
		}
		if n := sources(v.VolumeSource); n != 1 {
			c.fail(vw, "has %d sources (exactly one of emptyDir, secret, configMap, ...)", n)
		}
		if s := v.Secret; s != nil {
			opt := s.Optional != nil && *s.Optional
			if len(s.Items) == 0 {
				refs = append(refs, secretRef{vw, s.SecretName, "", opt})
			}
			for _, it := range s.Items {
				refs = append(refs, secretRef{vw, s.SecretName, it.Key, opt})
			}
		}
		if cm := v.ConfigMap; cm != nil && !configMaps[cm.Name] && (cm.Optional == nil || !*cm.Optional) {
			c.fail(vw, "ConfigMap %q is not in the render", cm.Name)
		}
	}
	for _, cl := range t.claims {
		volumes[cl] = true
	}

	names := map[string]bool{}
	portNames := map[string]bool{}
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, ct := range all {
		cw := w + " container " + ct.Name
		if names[ct.Name] {
			c.fail(cw, "container name used twice")
		}
		names[ct.Name] = true
		for _, e := range validation.IsDNS1123Label(ct.Name) {
			c.fail(cw, "name: %s", e)
		}
		if strings.TrimSpace(ct.Image) == "" {
			c.fail(cw, "no image")
		}
		paths := map[string]bool{}
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.fail(cw, "volumeMount %q names no volume of the pod", m.Name)
			}
			if !strings.HasPrefix(m.MountPath, "/") {
				c.fail(cw, "mountPath %q is not absolute", m.MountPath)
			}
			if paths[m.MountPath] {
				c.fail(cw, "mountPath %q used twice", m.MountPath)
			}
			paths[m.MountPath] = true
		}
		own := map[string]bool{}
		for _, p := range ct.Ports {
			if p.Name != "" {
				for _, e := range validation.IsValidPortName(p.Name) {
					c.fail(cw, "port name %q: %s", p.Name, e)
				}
				if portNames[p.Name] {
					c.fail(cw, "port name %q used twice in the pod", p.Name)
				}
				portNames[p.Name] = true
				own[p.Name] = true
			}
			for _, e := range validation.IsValidPortNum(int(p.ContainerPort)) {
				c.fail(cw, "containerPort: %s", e)
			}
		}
		for kind, p := range map[string]*corev1.Probe{"readinessProbe": ct.ReadinessProbe, "livenessProbe": ct.LivenessProbe, "startupProbe": ct.StartupProbe} {
			if p == nil {
				continue
			}
			var port *intstr.IntOrString
			if p.HTTPGet != nil {
				port = &p.HTTPGet.Port
			} else if p.TCPSocket != nil {
				port = &p.TCPSocket.Port
			}
			if port == nil {
				continue
			}
			if port.Type == intstr.String && !own[port.StrVal] {
				c.fail(cw, "%s names port %q, which the container does not have", kind, port.StrVal)
			} else if port.Type == intstr.Int {
				for _, e := range validation.IsValidPortNum(port.IntValue()) {
					c.fail(cw, "%s port: %s", kind, e)
				}
			}
		}
		defined := map[string]bool{}
		for _, e := range ct.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				c.fail(cw, "env %q: %s", e.Name, msg)
			}
			if defined[e.Name] {
				c.fail(cw, "env %q defined twice", e.Name)
			}
			for _, m := range varRef.FindAllStringSubmatch(e.Value, -1) {
				if !defined[m[1]] {
					c.fail(cw, "env %q refers to $(%s), which is not defined before it (Kubernetes leaves it unexpanded)", e.Name, m[1])
				}
			}
			defined[e.Name] = true
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				r := e.ValueFrom.SecretKeyRef
				refs = append(refs, secretRef{cw + " env " + e.Name, r.Name, r.Key, r.Optional != nil && *r.Optional})
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				r := e.ValueFrom.ConfigMapKeyRef
				if !configMaps[r.Name] && (r.Optional == nil || !*r.Optional) {
					c.fail(cw, "env %q: ConfigMap %q is not in the render", e.Name, r.Name)
				}
			}
		}
		for _, ef := range ct.EnvFrom {
			if ef.SecretRef != nil {
				refs = append(refs, secretRef{cw + " envFrom", ef.SecretRef.Name, "", ef.SecretRef.Optional != nil && *ef.SecretRef.Optional})
			}
		}
	}
	return refs
}

// sources counts the volume sources set (exactly one is valid).
func sources(vs corev1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(vs)
	for i := 0; i < v.NumField(); i++ {
		if !v.Field(i).IsNil() {
			n++
		}
	}
	return n
}

// checkSelectors: every Service and PodDisruptionBudget selects some pod
// template, and a Service's named targetPorts are ports of those pods.
func (c *checker) checkSelectors(tpls []podTemplate) {
	matching := func(sel labels.Selector) []podTemplate {
		var out []podTemplate
		for _, t := range tpls {
			if sel.Matches(labels.Set(t.labels)) {
				out = append(out, t)
			}
		}
		return out
	}
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *corev1.Service:
			if o.Spec.Type == corev1.ServiceTypeExternalName || len(o.Spec.Selector) == 0 {
				continue
			}
			pods := matching(labels.SelectorFromSet(o.Spec.Selector))
			if len(pods) == 0 {
				c.fail(d.where, "selector %v matches no pod template of the render", o.Spec.Selector)
				continue
			}
			for _, p := range o.Spec.Ports {
				for _, e := range validation.IsValidPortNum(int(p.Port)) {
					c.fail(d.where, "port %q: %s", p.Name, e)
				}
				if p.TargetPort.Type != intstr.String {
					continue
				}
				for _, t := range pods {
					if !hasPort(t.spec, p.TargetPort.StrVal) {
						c.fail(d.where, "targetPort %q is no container port of %s", p.TargetPort.StrVal, t.where)
					}
				}
			}
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
			if err != nil || o.Spec.Selector == nil {
				c.fail(d.where, "spec.selector: %v", err)
				continue
			}
			if len(matching(sel)) == 0 {
				c.fail(d.where, "selector %s matches no pod template of the render", sel)
			}
		}
	}
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, ct := range spec.Containers {
		for _, p := range ct.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// find returns the object of the render with this kind and name.
func (c *checker) find(kind, name string) runtime.Object {
	for _, d := range c.docs {
		if d.kind == kind && d.name == name {
			return d.obj
		}
	}
	return nil
}

// value is -extract's: Secret/NAME/KEY (decoded) or ConfigMap/NAME/KEY.
func (c *checker) value(spec string) ([]byte, error) {
	p := strings.SplitN(spec, "/", 3)
	if len(p) != 3 {
		return nil, fmt.Errorf("-extract %q: want KIND/NAME/KEY", spec)
	}
	switch o := c.find(p[0], p[1]).(type) {
	case *corev1.Secret:
		if v, ok := o.Data[p[2]]; ok {
			return v, nil
		}
		if v, ok := o.StringData[p[2]]; ok {
			return []byte(v), nil
		}
	case *corev1.ConfigMap:
		if v, ok := o.Data[p[2]]; ok {
			return []byte(v), nil
		}
	case nil:
		return nil, fmt.Errorf("-extract %q: no %s %q in the render", spec, p[0], p[1])
	default:
		return nil, fmt.Errorf("-extract %q: only Secret and ConfigMap", spec)
	}
	return nil, fmt.Errorf("-extract %q: no key %q", spec, p[2])
}

// env is -env's: the variables the kubelet would give the container of the
// first pod of the workload, in order, with $(VAR) expanded and
// secretKeyRef and configMapKeyRef read from the render (a missing one,
// unless optional, is an error).
func (c *checker) env(spec string) ([]string, error) {
	p := strings.SplitN(spec, "/", 3)
	if len(p) != 3 {
		return nil, fmt.Errorf("-env %q: want KIND/NAME/CONTAINER", spec)
	}
	var podSpec *corev1.PodSpec
	pod := p[1] + "-0"
	for _, t := range c.templates() {
		if strings.Contains(t.where, "("+p[0]+"/"+p[1]+")") {
			podSpec = t.spec
		}
	}
	if podSpec == nil {
		return nil, fmt.Errorf("-env %q: no %s %q with a pod template in the render", spec, p[0], p[1])
	}
	var ct *corev1.Container
	for i := range podSpec.Containers {
		if podSpec.Containers[i].Name == p[2] {
			ct = &podSpec.Containers[i]
		}
	}
	if ct == nil {
		return nil, fmt.Errorf("-env %q: no container %q", spec, p[2])
	}
	vals := map[string]string{}
	var out []string
	for _, e := range ct.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			var err error
			var b []byte
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				b = []byte(pod)
			case f.SecretKeyRef != nil:
				b, err = c.value("Secret/" + f.SecretKeyRef.Name + "/" + f.SecretKeyRef.Key)
				if err != nil && f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional {
					continue
				}
			case f.ConfigMapKeyRef != nil:
				b, err = c.value("ConfigMap/" + f.ConfigMapKeyRef.Name + "/" + f.ConfigMapKeyRef.Key)
				if err != nil && f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional {
					continue
				}
			default:
				err = fmt.Errorf("env %s: this valueFrom is not simulated", e.Name)
			}
			if err != nil {
				return nil, err
			}
			v = string(b)
		} else {
			v = varRef.ReplaceAllStringFunc(v, func(m string) string {
				if x, ok := vals[m[2:len(m)-1]]; ok {
					return x
				}
				return m
			})
		}
		if strings.ContainsAny(v, "\n\x00") {
			return nil, fmt.Errorf("env %s: a value with a newline cannot be printed as a line", e.Name)
		}
		vals[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}
