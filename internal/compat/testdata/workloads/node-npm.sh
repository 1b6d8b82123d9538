# proves: npm installs a package and its dependency from the npm registry
# through cordon's egress proxy with only registry.npmjs.org:443 allowed,
# writing node_modules, its cache (in the home directory, or where
# npm_config_cache says: cordon keeps the agent's own) and a lock file, and
# node requires what it installed.
set -eux
npm init -y > /dev/null
npm install --no-audit --no-fund is-odd@3.0.1
test -f package-lock.json
node -e '
const isOdd = require("is-odd");
if (!isOdd(3) || isOdd(4)) process.exit(1);
console.log("npm: ok");
'
test -d "${npm_config_cache:-$HOME/.npm}/_cacache"
