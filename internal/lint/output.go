package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
)

// WriteText prints one finding per line, file:line:col first, the fix
// indented under it.
func WriteText(w io.Writer, fs []Finding) {
	for _, f := range fs {
		pos := f.File
		if f.Line > 0 {
			pos = fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Col)
		}
		field := ""
		if f.Field != "" {
			field = f.Field + ": "
		}
		fmt.Fprintf(w, "%s: %s %s %s: %s%s\n    fix: %s\n", pos, f.Severity, f.Code, f.Rule, field, f.Message, f.Fix)
	}
	errors, warnings := count(fs)
	fmt.Fprintf(w, "%s: %s, %s\n", plural(len(fs), "finding"), plural(errors, "error"), plural(warnings, "warning"))
}

// plural is "1 error", "2 errors", "0 errors".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func count(fs []Finding) (errors, warnings int) {
	for _, f := range fs {
		if f.Severity == Error {
			errors++
		} else {
			warnings++
		}
	}
	return
}

// WriteJSON prints the findings as one JSON document.
func WriteJSON(w io.Writer, fs []Finding) error {
	if fs == nil {
		fs = []Finding{}
	}
	errors, warnings := count(fs)
	b, err := json.MarshalIndent(struct {
		Findings []Finding `json:"findings"`
		Errors   int       `json:"errors"`
		Warnings int       `json:"warnings"`
	}{fs, errors, warnings}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// SARIF 2.1.0, the parts cordon writes.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string      `json:"id"`
	Name                 string      `json:"name"`
	ShortDescription     sarifText   `json:"shortDescription"`
	FullDescription      sarifText   `json:"fullDescription"`
	Help                 sarifText   `json:"help"`
	DefaultConfiguration sarifConfig `json:"defaultConfiguration"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID     string          `json:"ruleId"`
	RuleIndex  int             `json:"ruleIndex"`
	Level      string          `json:"level"`
	Message    sarifText       `json:"message"`
	Locations  []sarifLocation `json:"locations"`
	Properties map[string]any  `json:"properties,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// WriteSARIF prints the findings as a SARIF 2.1.0 log, for code scanning
// tools to show inline. File paths are written as given, with forward
// slashes.
func WriteSARIF(w io.Writer, fs []Finding, version string) error {
	rules := Rules()
	index := map[string]int{}
	var srules []sarifRule
	for i, r := range rules {
		index[r.Code] = i
		srules = append(srules, sarifRule{
			ID: r.Code, Name: r.Name,
			ShortDescription:     sarifText{r.Summary},
			FullDescription:      sarifText{r.Summary + ": " + r.Why + "."},
			Help:                 sarifText{r.Fix},
			DefaultConfiguration: sarifConfig{Level: string(r.Severity)},
		})
	}
	results := []sarifResult{}
	for _, f := range fs {
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: filepath.ToSlash(f.File)}}}
		if f.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Line, StartColumn: f.Col}
		}
		msg := f.Message
		if f.Field != "" {
			msg = f.Field + ": " + msg
		}
		results = append(results, sarifResult{
			RuleID: f.Code, RuleIndex: index[f.Code], Level: string(f.Severity),
			Message:    sarifText{msg + " Fix: " + f.Fix},
			Locations:  []sarifLocation{loc},
			Properties: map[string]any{"field": f.Field, "fix": f.Fix},
		})
	}
	b, err := json.MarshalIndent(sarifLog{
		Schema:  "https://json.schemastore.org/sarif-2.1.0.json",
		Version: "2.1.0",
		Runs: []sarifRun{{
			Tool:    sarifTool{Driver: sarifDriver{Name: "cordon", Version: version, InformationURI: "https://github.com/cordon-sandbox/cordon", Rules: srules}},
			Results: results,
		}},
	}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
