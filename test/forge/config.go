package giteaharness

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"text/template"
)

// appINI is Gitea's configuration for a test instance: loopback only, SQLite,
// no SSH, no mail, no Actions, in-memory queues and caches, and webhooks
// allowed to reach loopback (where cairn's receiver listens).
var appINI = template.Must(template.New("app.ini").Parse(`APP_NAME = cairn test forge
RUN_USER = {{.User}}
RUN_MODE = prod
WORK_PATH = {{.Work}}

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = {{.Port}}
DOMAIN = 127.0.0.1
ROOT_URL = http://127.0.0.1:{{.Port}}/
OFFLINE_MODE = true
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
APP_DATA_PATH = {{.Work}}/data
STATIC_ROOT_PATH = {{.Work}}

[database]
DB_TYPE = sqlite3
PATH = {{.Work}}/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = {{.Work}}/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = {{.SecretKey}}
INTERNAL_TOKEN = {{.InternalToken}}
PASSWORD_HASH_ALGO = pbkdf2

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10

[actions]
ENABLED = false

[mailer]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[queue]
TYPE = channel

[cache]
ADAPTER = memory

[session]
PROVIDER = memory

[picture]
DISABLE_GRAVATAR = true
ENABLE_FEDERATED_AVATAR = false

[cron]
ENABLED = false

[log]
MODE = console
LEVEL = Info
`))

type iniValues struct {
	User, Work               string
	Port                     int
	SecretKey, InternalToken string
}

func writeAppINI(path string, v iniValues) error {
	var b strings.Builder
	if err := appINI.Execute(&b, v); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
