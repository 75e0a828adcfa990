package sigma

import (
	"bufio"
	"os"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestStream runs rules over a journal-style stream decoded by
// event.Unmarshal: an npm install whose install script starts a shell
// that downloads a script to /tmp and runs it. The SigmaHQ rules and a
// correlation of three of sandtrail's must raise exactly these matches,
// on exactly these events; the same exec in another session, whose parent
// the table does not know, raises nothing.
func TestStream(t *testing.T) {
	f, err := os.Open("testdata/streams/install_script_stager.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := LoadFiles("testdata/streams/rules.yml",
		"../rules/sigmahq/proc_creation_lnx_base64_execution.yml",
		"../rules/sigmahq/proc_creation_lnx_susp_pipe_shell.yml",
		"../rules/sigmahq/proc_creation_lnx_curl_wget_exec_tmp.yml")
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvaluator(set)
	type hit struct {
		title string
		seqs  string
	}
	var got []hit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		e, err := event.Unmarshal(sc.Bytes())
		if err != nil {
			t.Fatalf("event.Unmarshal(%s): %v", sc.Bytes(), err)
		}
		for _, m := range ev.Observe(e) {
			got = append(got, hit{m.Title, fmtSeqs(m.Seqs)})
		}
	}
	want := []hit{
		{"Shell started by an npm install", "103"},
		{titleCurl, "103"},
		{"Download written to /tmp", "107"},
		{"Script run from /tmp", "110"},
		{"Install script stager", "103,107,110"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("matches:\n got %v\nwant %v", got, want)
	}
	if s := ev.Stats(); s.Procs != 4 || s.ProcEvictions != 0 {
		t.Errorf("Stats() = %+v, want 4 live processes (200, 201, 203; 201 of sess-b) and no evictions", s)
	}
}

func fmtSeqs(s []uint64) string {
	var b []byte
	for i, x := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, []byte(formatInt(int64(x)))...)
	}
	return string(b)
}
