// Package doctexttest writes small valid PDF files for tests: objects
// with a correct cross-reference table, text in simple and CMap fonts,
// plain or compressed content streams.
package doctexttest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// File assembles a PDF from object bodies (object i+1 is objs[i]; the
// first is the catalog) with a correct cross-reference table.
func File(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// Stream is a stream object's body holding data.
func Stream(dict, data string) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

// Deflate compresses s for a /FlateDecode stream.
func Deflate(s string) string {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

// ToUnicode maps the two-byte codes 1 and 2 to 日 and 本.
const ToUnicode = `/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CMapName /Test def
1 begincodespacerange
<0000> <FFFF>
endcodespacerange
2 beginbfchar
<0001> <65E5>
<0002> <672C>
endbfchar
endcmap
CMapName currentdict /CMap defineresource pop
end
end`

// Doc builds a PDF with one page per content stream. Its fonts: F1
// Helvetica in WinAnsiEncoding, F2 a Type0 font whose ToUnicode CMap is
// ToUnicode. A content stream starting with "deflate:" is compressed.
func Doc(contents ...string) []byte { return DocCMap(ToUnicode, contents...) }

// DocCMap is Doc with another ToUnicode CMap for F2.
func DocCMap(cmap string, contents ...string) []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"", // the page tree, below
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		"<< /Type /Font /Subtype /Type0 /BaseFont /Test /Encoding /Identity-H /DescendantFonts [6 0 R] /ToUnicode 5 0 R >>",
		Stream("", cmap),
		"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Test /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>",
	}
	var kids []string
	for _, c := range contents {
		page := len(objs) + 1
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>", page+1))
		if z, ok := strings.CutPrefix(c, "deflate:"); ok {
			objs = append(objs, Stream("/Filter /FlateDecode", Deflate(z)))
		} else {
			objs = append(objs, Stream("", c))
		}
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(contents))
	return File(objs...)
}

// HugeXref is a PDF whose cross-reference table claims an object numbered
// four billion: the library allocates a table for it and the process dies
// of a fatal out-of-memory error, which no recover catches.
func HugeXref() []byte {
	return []byte("%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\nxref\n4000000000 1\n0000000009 00000 n \ntrailer\n<< /Size 2 /Root 1 0 R >>\nstartxref\n44\n%%EOF\n")
}
