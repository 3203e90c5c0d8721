// Command gitopseval runs the GitOps health rules of config/gitops the way the tools that load them do, so that the
// tests check them in the engines that run them, not in look-alikes:
//
//	gitopseval argocd RULE.lua OBJECT.json
//	gitopseval flux INPROGRESS FAILED CURRENT OBJECT.json
//
// argocd runs the Lua rule in gopher-lua with the libraries Argo CD opens for a health customization (package, base,
// table; no string, math or io library), the object as the global `obj`, a one-second limit, and checks the returned
// table as Argo CD does; it prints `{"status":..,"message":..}`.
//
// flux evaluates the three CEL expressions of a Kustomization's healthCheckExprs entry as Flux's status evaluator does
// (cel-go with Flux's environment options, the object's top-level fields as the variables, numbers as Kubernetes
// decodes them): an object whose status.observedGeneration differs from metadata.generation is InProgress; otherwise
// the first of inProgress, failed and current that is true gives InProgress, Failed or Current, and none gives
// InProgress. It prints the status; an expression that cannot be evaluated is an error (exit status 1), as in Flux.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	lua "github.com/yuin/gopher-lua"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: gitopseval argocd RULE.lua OBJECT.json | gitopseval flux INPROGRESS FAILED CURRENT OBJECT.json"))
	}
	var (
		out string
		err error
	)
	switch {
	case os.Args[1] == "argocd" && len(os.Args) == 4:
		out, err = argocd(os.Args[2], os.Args[3])
	case os.Args[1] == "flux" && len(os.Args) == 6:
		out, err = flux(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		err = fmt.Errorf("unknown command or wrong arguments: %v", os.Args[1:])
	}
	if err != nil {
		fail(err)
	}
	fmt.Print(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// readObject decodes a JSON object as Kubernetes' unstructured decoding does: integers as int64, other numbers as
// float64.
func readObject(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var raw map[string]any
	if err := decoder.Decode(&raw); err != nil {
		return nil, err
	}
	converted, ok := numbers(raw).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a JSON object", path)
	}
	return converted, nil
}

func numbers(value any) any {
	switch v := value.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = numbers(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = numbers(v[k])
		}
		return v
	default:
		return v
	}
}

// argocd runs one health rule as Argo CD runs a health customization without useOpenLibs.
func argocd(rulePath, objectPath string) (string, error) {
	script, err := os.ReadFile(rulePath)
	if err != nil {
		return "", err
	}
	object, err := readObject(objectPath)
	if err != nil {
		return "", err
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), NRet: 0, Protect: true}, lua.LString(name)); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, object))
	if err := l.DoString(string(script)); err != nil {
		return "", err
	}
	returned, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	status := returned.RawGetString("status")
	message := returned.RawGetString("message")
	health := map[string]string{"status": lua.LVAsString(status), "message": lua.LVAsString(message)}
	switch health["status"] {
	case "Unknown", "Progressing", "Suspended", "Healthy", "Degraded", "Missing":
	default:
		health = map[string]string{"status": "Unknown", "message": "Lua returned an invalid health status"}
	}
	encoded, err := json.Marshal(health)
	return string(encoded), err
}

// toLua is the object as Argo CD hands it to a rule: maps as tables keyed by string, arrays as sequences, numbers as
// Lua numbers.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		table := l.CreateTable(len(v), 0)
		for _, item := range v {
			table.Append(toLua(l, item))
		}
		return table
	case map[string]any:
		table := l.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(l, item))
		}
		return table
	default:
		return lua.LNil
	}
}

// flux evaluates one healthCheckExprs entry as Flux's status evaluator does.
func flux(inProgress, failed, current, objectPath string) (string, error) {
	object, err := readObject(objectPath)
	if err != nil {
		return "", err
	}
	if observed, ok := nested(object, "status", "observedGeneration").(int64); ok {
		if generation, ok := nested(object, "metadata", "generation").(int64); ok && observed != generation {
			return "InProgress", nil
		}
	}
	for _, check := range []struct{ expression, status string }{
		{inProgress, "InProgress"},
		{failed, "Failed"},
		{current, "Current"},
	} {
		if check.expression == "" {
			continue
		}
		result, err := evaluate(check.expression, object)
		if err != nil {
			return "", err
		}
		if result {
			return check.status, nil
		}
	}
	return "InProgress", nil
}

func nested(object map[string]any, path ...string) any {
	var value any = object
	for _, key := range path {
		m, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		value = m[key]
	}
	return value
}

// evaluate parses (Flux does not type-check these expressions: kinds differ in their top-level fields) and runs one
// expression in Flux's CEL environment.
func evaluate(expression string, object map[string]any) (bool, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return false, err
	}
	parsed, issues := env.Parse(expression)
	if issues != nil {
		return false, fmt.Errorf("failed to parse the CEL expression '%s': %s", expression, issues.String())
	}
	program, err := env.Program(parsed, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
	if err != nil {
		return false, err
	}
	value, _, err := program.ContextEval(context.Background(), object)
	if err != nil {
		return false, fmt.Errorf("failed to evaluate the CEL expression '%s': %w", expression, err)
	}
	result, ok := value.(types.Bool)
	if !ok {
		return false, fmt.Errorf("failed to evaluate CEL expression as boolean: '%s'", expression)
	}
	return bool(result), nil
}
