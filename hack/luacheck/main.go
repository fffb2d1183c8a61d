// Command luacheck runs an Argo CD resource customization script (health.lua, discovery.lua or
// action.lua) the way Argo CD's controller does, so that our scripts are tested under the same
// interpreter, not an approximation of it.
//
// What "the way Argo CD does" means here (argo-cd util/lua/lua.go, mirrored, not imported: the
// argo-cd module drags in the whole controller):
//   - github.com/yuin/gopher-lua, the version Argo CD pins in its go.mod;
//   - lua.Options{SkipOpenLibs: true}, then only the package, base and table libraries, plus a
//     reduced os (date, time, clock): no string, math, io library; a script using
//     string.format fails here as it would in Argo CD;
//   - the object as the global `obj`, decoded from JSON as Kubernetes' unstructured decoding
//     yields it (integers as int64, other numbers as float64);
//   - a 1 s deadline per run;
//   - the script's last returned value must be a table; its JSON encoding (layeh.com/gopher-json,
//     as Argo CD) is the result, and a health status outside Argo's six is "Unknown".
//
// Usage: luacheck health|discovery|action SCRIPT < objects.jsonl
// Each input line is one object; each output line is the result for it as JSON, or
// {"error": "..."} when the script failed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

var healthStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: luacheck health|discovery|action SCRIPT < objects.jsonl")
		os.Exit(2)
	}
	mode, path := os.Args[1], os.Args[2]
	if mode != "health" && mode != "discovery" && mode != "action" {
		fmt.Fprintf(os.Stderr, "luacheck: unknown mode %q\n", mode)
		os.Exit(2)
	}
	script, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "luacheck:", err)
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 16<<20) // an object is at most ~1.5 MiB (etcd's limit)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		line := bytes.TrimSpace(in.Bytes())
		if len(line) == 0 {
			continue
		}
		result, err := runOne(mode, string(script), line)
		if err != nil {
			result, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		out.Write(result)
		out.WriteByte('\n')
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "luacheck:", err)
		os.Exit(2)
	}
}

func runOne(mode, script string, objJSON []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(objJSON))
	dec.UseNumber()
	var obj map[string]interface{}
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("input is not a JSON object: %w", err)
	}
	l := newState()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	ret := l.Get(-1)
	if ret.Type() != lua.LTTable {
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type().String())
	}
	encoded, err := luajson.Encode(ret)
	if err != nil {
		return nil, err
	}
	if mode != "health" {
		return encoded, nil
	}
	var hs struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(encoded, &hs); err != nil {
		return nil, err
	}
	if !healthStatuses[hs.Status] {
		hs.Status, hs.Message = "Unknown", "Lua returned an invalid health status"
	}
	return json.Marshal(hs)
}

// newState opens what Argo CD opens for a resource customization without useOpenLibs.
func newState() *lua.LState {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			panic(err)
		}
	}
	// The reduced os library: the global `os` and `require("os")` both give date/time/clock only.
	l.SetGlobal(lua.OsLibName, reducedOs(l))
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(reducedOs(l))
		return 1
	})
	return l
}

func reducedOs(l *lua.LState) *lua.LTable {
	full := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer full.Close()
	full.Push(full.NewFunction(lua.OpenOs))
	full.Call(0, 1)
	src := full.Get(-1).(*lua.LTable)
	t := l.NewTable()
	for _, name := range []string{"date", "time", "clock"} {
		fn := src.RawGetString(name).(*lua.LFunction)
		t.RawSetString(name, l.NewFunction(fn.GFunction))
	}
	return t
}

// decodeValue turns decoded JSON into Lua values as Argo CD's decodeValue does for an
// unstructured object, whose integers are int64 and whose other numbers are float64.
func decodeValue(l *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return lua.LNumber(i)
		}
		f, _ := v.Float64()
		return lua.LNumber(f)
	case []interface{}:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]interface{}:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}
