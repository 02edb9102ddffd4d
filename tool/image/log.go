package image

import (
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// SetLog sends the log of containers/image and containers/storage (they
// use logrus) to w at level: at debug it shows every registry request,
// the credentials and certificate directories looked up, blob reuse and
// mount decisions, and retries.
func SetLog(w io.Writer, level slog.Level) {
	logrus.SetOutput(w)
	switch {
	case level <= slog.LevelDebug:
		logrus.SetLevel(logrus.DebugLevel)
	case level <= slog.LevelInfo:
		logrus.SetLevel(logrus.InfoLevel)
	case level <= slog.LevelWarn:
		logrus.SetLevel(logrus.WarnLevel)
	default:
		logrus.SetLevel(logrus.ErrorLevel)
	}
}
