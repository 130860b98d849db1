// render-check: a minimal Helm-like renderer (text/template + sprig, as Helm uses) for checking
// charts/promscaler where Helm itself cannot be installed. See README.md.
package main

import (
	"bytes"
	"fmt"
	"io/ioutil"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

func conv(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, vv := range t {
			m[fmt.Sprint(k)] = conv(vv)
		}
		return m
	case []interface{}:
		for i := range t {
			t[i] = conv(t[i])
		}
		return t
	}
	return v
}

func merge(dst, src map[string]interface{}) {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func main() {
	chart, overrides, ns := os.Args[1], os.Args[2], os.Args[3]
	vals := map[string]interface{}{}
	b, _ := ioutil.ReadFile(filepath.Join(chart, "values.yaml"))
	var raw interface{}
	if err := yaml.Unmarshal(b, &raw); err != nil { panic(err) }
	vals = conv(raw).(map[string]interface{})
	if overrides != "-" {
		ob, _ := ioutil.ReadFile(overrides)
		var o interface{}
		yaml.Unmarshal(ob, &o)
		if o != nil { merge(vals, conv(o).(map[string]interface{})) }
	}
	var cm interface{}
	cb, _ := ioutil.ReadFile(filepath.Join(chart, "Chart.yaml"))
	yaml.Unmarshal(cb, &cm)
	c := conv(cm).(map[string]interface{})
	top := map[string]interface{}{
		"Values":  vals,
		"Release": map[string]interface{}{"Name": "promscaler", "Namespace": ns, "Service": "Helm"},
		"Chart":   map[string]interface{}{"Name": c["name"], "Version": c["version"], "AppVersion": c["appVersion"]},
	}
	t := template.New("gotpl").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" { return nil, fmt.Errorf(msg) }
		return v, nil
	}
	funcs["toYaml"] = func(v interface{}) string {
		d, err := yaml.Marshal(v)
		if err != nil { return "" }
		return strings.TrimSuffix(string(d), "\n")
	}
	funcs["lookup"] = func(a, k, n, name string) map[string]interface{} { return map[string]interface{}{} }
	funcs["fail"] = func(msg string) (string, error) { return "", fmt.Errorf(msg) }
	t.Funcs(funcs)
	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	sort.Strings(files)
	for _, f := range files {
		fb, _ := ioutil.ReadFile(f)
		if _, err := t.New(filepath.Base(f)).Parse(string(fb)); err != nil {
			fmt.Fprintln(os.Stderr, "PARSE", f, err); os.Exit(1)
		}
	}
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") { continue }
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, base, top); err != nil {
			fmt.Fprintln(os.Stderr, "EXEC", base, err); os.Exit(1)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			fmt.Fprintln(os.Stderr, out)
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", base, out)
	}
}
