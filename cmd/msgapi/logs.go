package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Values of MSGAPI_LOG_FORMAT.
var logFormats = []string{"auto", "json", "console"}

// logOutput is where the log's stdout copy goes, by MSGAPI_LOG_FORMAT:
// zerolog's JSON lines as they are (json; auto when stdout is not a
// terminal: a container, a pipe, a file), or through zerolog's console
// writer, one readable line per event (console; auto at a terminal). Only
// stdout is rendered: the metrics and Loki always read the JSON.
func logOutput(stdout io.Writer, format string) (io.Writer, error) {
	tty := isTerminal(stdout)
	switch format {
	case "json":
		return stdout, nil
	case "auto":
		if !tty {
			return stdout, nil
		}
	case "console":
	default:
		return nil, fmt.Errorf("MSGAPI_LOG_FORMAT=%q is not one of auto, json, console", format)
	}
	return zerolog.ConsoleWriter{Out: stdout, TimeFormat: time.TimeOnly, NoColor: !tty}, nil
}

// isTerminal reports whether w is a terminal (a *os.File on a tty).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
