package doctext

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/ledongthuc/pdf"
)

// The child: extractPDF runs this executable with envChild set, and this
// package's init turns the process into the extractor before main (or a
// test binary's TestMain) starts. It confines itself, reads the PDF from
// stdin, writes at most the limit's bytes of text to stdout and exits: 0
// with its text (none for a PDF without text), 1 when the PDF failed to
// parse before any text, 2 when the child could not start.
func init() {
	if os.Getenv(envChild) != "1" {
		return
	}
	os.Exit(runChild())
}

func runChild() int {
	limit, err := strconv.Atoi(os.Getenv(envLimit))
	if err == nil && limit <= 0 {
		err = errors.New("limit must be positive")
	}
	var memory uint64
	if err == nil {
		memory, err = strconv.ParseUint(os.Getenv(envMemory), 10, 64)
	}
	if err == nil {
		err = confine(memory)
	}
	var r io.ReaderAt
	var size int64
	if err == nil {
		r, size, err = childInput(os.Stdin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctext child:", err)
		return 2
	}
	text, err := pdfText(r, size, limit)
	if err != nil && len(text) == 0 {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := os.Stdout.Write(text); err != nil {
		return 2
	}
	return 0
}

// confine limits the child: memory more bytes of data than it holds now
// (so whatever the runtime, or the race detector, mapped at start is not
// counted), childCPU seconds of CPU, and no file writes.
func confine(memory uint64) error {
	held, err := vmData()
	if err != nil {
		return err
	}
	for _, l := range []struct {
		res int
		max uint64
	}{
		{syscall.RLIMIT_DATA, held + memory},
		{syscall.RLIMIT_CPU, childCPU},
		{syscall.RLIMIT_FSIZE, 0},
	} {
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", l.res, err)
		}
	}
	debug.SetMemoryLimit(int64(memory / 2)) // collect hard before the hard limit
	return nil
}

// vmData is the process's data segment size (VmData), in bytes.
func vmData() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmData in /proc/self/status")
}

// childInput is the PDF on stdin: read in place when it is a file, else
// read into memory up to MaxPDFInput bytes.
func childInput(f *os.File) (io.ReaderAt, int64, error) {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return f, fi.Size(), nil
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxPDFInput+1))
	if err == nil && len(b) > MaxPDFInput {
		err = fmt.Errorf("over %d MiB", MaxPDFInput>>20)
	}
	return bytes.NewReader(b), int64(len(b)), err
}

// errFull stops extraction once the text reached its limit.
var errFull = errors.New("doctext: text limit reached")

// pdfText returns the text of the first MaxPDFPages pages of a PDF, up to
// limit bytes. A page that fails to parse is skipped; the error returned
// is the first failure.
func pdfText(r io.ReaderAt, size int64, limit int) (text []byte, err error) {
	w := &textWriter{limit: limit}
	defer func() {
		if x := recover(); x != nil && x != any(errFull) {
			err = fmt.Errorf("malformed PDF: %v", x)
		}
		text = cut([]byte(w.b.String()), limit)
	}()
	rd, err := pdf.NewReader(r, size)
	if err != nil {
		return nil, err
	}
	var first error
	for i := 1; i <= min(rd.NumPage(), MaxPDFPages); i++ {
		w.brk(sepPage)
		if err := pageText(rd.Page(i), w); err != nil && first == nil {
			first = fmt.Errorf("page %d: %w", i, err)
		}
	}
	return nil, first
}

// wordGap is the TJ adjustment (thousandths of a text space unit) past
// which a gap between two strings reads as a space between words.
const wordGap = 200

// pageText writes a page's text, interpreting its content stream with the
// library's interpreter and font decoders. It emits the shown strings (or
// the ActualText of a marked-content span that replaces them), a line
// break where the text line moves up or down, and a space for a TJ gap
// wider than wordGap. Horizontal moves add nothing: producers that place
// each glyph run on its own show the spaces as glyphs.
func pageText(p pdf.Page, w *textWriter) (err error) {
	defer func() {
		if x := recover(); x != nil {
			if x == any(errFull) {
				panic(x)
			}
			err = fmt.Errorf("%v", x)
		}
	}()
	contents := p.V.Key("Contents")
	if p.V.IsNull() || contents.IsNull() {
		return nil
	}
	var (
		fonts      = map[string]*pdf.Font{}
		enc        pdf.TextEncoding
		y, leading float64 // the text line's y (text space, unscaled)
		shownY     float64 // the line of the text last shown
		shown      bool
		marked     []bool // open marked-content spans: whether each has ActualText
		hidden     int    // open spans with ActualText: their strings are not shown
		actual     string // the ActualText to show in place of the span's first string
	)
	show := func(s string) {
		if shown && y != shownY {
			w.brk(sepLine)
		}
		shown, shownY = true, y
		w.show(s)
	}
	showString := func(v pdf.Value) {
		if hidden > 0 {
			if actual != "" {
				show(actual) // where the span's text is
				actual = ""
			}
			return
		}
		s := v.RawString()
		if enc != nil {
			s = enc.Decode(s)
		}
		show(s)
	}
	pdf.Interpret(contents, func(stk *pdf.Stack, op string) {
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		switch {
		case op == "BT":
			y = 0
		case op == "Tf" && len(args) == 2:
			f, ok := fonts[args[0].Name()]
			if !ok {
				font := p.Font(args[0].Name())
				f, fonts[args[0].Name()] = &font, &font
			}
			enc = f.Encoder()
		case op == "TL" && len(args) == 1:
			leading = args[0].Float64()
		case op == "Td" && len(args) == 2:
			y += args[1].Float64()
		case op == "TD" && len(args) == 2:
			leading = -args[1].Float64()
			y += args[1].Float64()
		case op == "Tm" && len(args) == 6:
			y = args[5].Float64()
		case op == "T*":
			y -= leading
			w.brk(sepLine)
		case op == "Tj" && len(args) == 1:
			showString(args[0])
		case op == "'" && len(args) == 1, op == `"` && len(args) == 3:
			y -= leading
			w.brk(sepLine)
			showString(args[len(args)-1])
		case op == "TJ" && len(args) == 1:
			for i := 0; i < args[0].Len(); i++ {
				switch v := args[0].Index(i); v.Kind() {
				case pdf.String:
					showString(v)
				case pdf.Integer, pdf.Real:
					if v.Float64() < -wordGap && hidden == 0 {
						w.brk(sepSpace)
					}
				}
			}
		case op == "BMC":
			marked = append(marked, false)
		case op == "BDC" && len(args) == 2:
			at := args[1].Key("ActualText")
			replaces := at.Kind() == pdf.String && hidden == 0
			if replaces {
				actual = at.Text()
				hidden++
			}
			marked = append(marked, replaces)
		case op == "EMC" && len(marked) > 0:
			if marked[len(marked)-1] {
				hidden--
				if actual != "" {
					show(actual) // a span that showed no string
					actual = ""
				}
			}
			marked = marked[:len(marked)-1]
		}
	})
	return nil
}

// Separators between shown strings, weakest first.
type sep int

const (
	sepNone sep = iota
	sepSpace
	sepLine
	sepPage
)

var sepText = [...]string{sepSpace: " ", sepLine: "\n", sepPage: "\n\n"}

// textWriter accumulates text up to a limit, then panics with errFull.
type textWriter struct {
	b       strings.Builder
	limit   int
	pending sep // the strongest separator since the last string shown
}

func (w *textWriter) brk(s sep) {
	if w.b.Len() > 0 {
		w.pending = max(w.pending, s)
	}
}

// show writes s less its control characters (but tabs and line breaks),
// after the pending separator.
func (w *textWriter) show(s string) {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if s == "" {
		return
	}
	if w.pending != sepNone {
		w.b.WriteString(sepText[w.pending])
		w.pending = sepNone
	}
	w.b.WriteString(s)
	if w.b.Len() >= w.limit {
		panic(errFull)
	}
}
