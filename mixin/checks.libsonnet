// Written by hand (the only .libsonnet here that mixin/generate.py does not write).
//
// Refuses a `_config` that would change what an alert means rather than tune it: the values
// are pasted into PromQL and into Prometheus templates, so `flapThreshold: '3 or vector(1)'`
// or a selector that closes its braces would still pass promtool, and a runbook URL holding
// `{{ ... }}` would be expanded by Prometheus. prometheusAlerts, prometheusRules and
// grafanaDashboards fail to evaluate, with one message naming every wrong key and its rule
// (mixin/README.md lists them).
// Characters by code point: std.member on a string is slow enough to show in a test run.
local between(c, first, last) = std.codepoint(c) >= std.codepoint(first) && std.codepoint(c) <= std.codepoint(last);
local isDigit(c) = between(c, '0', '9');
local isLower(c) = between(c, 'a', 'z');
local labelStart(c) = isLower(c) || between(c, 'A', 'Z') || c == '_';
local labelChar(c) = labelStart(c) || isDigit(c);
local control(c) = std.codepoint(c) < 32 || std.codepoint(c) == 127;

// A Prometheus label name, as PromQL writes it unquoted; `__` names are Prometheus' own.
local isLabelName(v) =
  std.isString(v) && std.length(v) > 0 && labelStart(v[0])
  && std.all([labelChar(c) for c in std.stringChars(v)])
  && !std.startsWith(v, '__');

// Label matchers as they go between a selector's braces: `name op "value"`, joined by commas;
// op is =, !=, =~ or !~; a value is double-quoted, with backslash escapes, on one line.
local matcherStep(state, c) =
  if state == 'error' then 'error'
  else if state == 'start' || state == 'next' then
    (if c == ' ' then state else if labelStart(c) then 'name' else 'error')
  else if state == 'name' then
    (if labelChar(c) then 'name' else if c == ' ' then 'afterName'
     else if c == '=' then 'equals' else if c == '!' then 'bang' else 'error')
  else if state == 'afterName' then
    (if c == ' ' then state else if c == '=' then 'equals' else if c == '!' then 'bang' else 'error')
  else if state == 'bang' then (if c == '=' || c == '~' then 'operator' else 'error')
  else if state == 'equals' then
    (if c == '~' || c == ' ' then 'operator' else if c == '"' then 'value' else 'error')
  else if state == 'operator' then (if c == ' ' then state else if c == '"' then 'value' else 'error')
  else if state == 'value' then
    (if c == '\\' then 'escape' else if c == '"' then 'closed' else if control(c) then 'error' else 'value')
  else if state == 'escape' then (if control(c) then 'error' else 'value')
  else if state == 'closed' then (if c == ' ' then state else if c == ',' then 'next' else 'error')
  else 'error';
local isMatchers(v) =
  std.isString(v) && std.foldl(matcherStep, std.stringChars(v), 'start') == 'closed';

// A Prometheus duration (1h, 90s, 1h30m): numbers each followed by a unit, the units in the
// order y, w, d, h, m, s, ms and each once, and longer than zero.
local units = ['y', 'w', 'd', 'h', 'm', 's', 'ms'];
local runs(v) = std.foldl(
  function(found, c)
    local kind = if isDigit(c) then 'number' else if isLower(c) then 'unit' else 'other';
    local last = std.length(found) - 1;
    if last >= 0 && found[last].kind == kind then
      found[:last] + [{ kind: kind, text: found[last].text + c }]
    else found + [{ kind: kind, text: c }],
  std.stringChars(v),
  []
);
local isDuration(v) =
  std.isString(v) && (
    local parts = runs(v);
    local pairs = std.range(0, std.length(parts) / 2 - 1);
    std.length(parts) > 0 && std.length(parts) % 2 == 0
    && std.all([
      parts[2 * i].kind == 'number' && parts[2 * i + 1].kind == 'unit'
      && std.member(units, parts[2 * i + 1].text)
      for i in pairs
    ])
    && (
      local ranks = [std.find(parts[2 * i + 1].text, units)[0] for i in pairs];
      std.all([ranks[i] < ranks[i + 1] for i in std.range(0, std.length(ranks) - 2)])
    )
    && std.any([std.parseInt(parts[2 * i].text) > 0 for i in pairs])
  );

// An http(s) URL of printable ASCII without the characters URLs must escape (braces among
// them: Prometheus expands {{ }} in annotations), with `%s` once and no other `%` but `%%`.
local urlForbidden = { [c]: true for c in std.stringChars(' "<>\\^`{|}') };
local isRunbookPattern(v) =
  std.isString(v) && (
    local scheme = if std.startsWith(v, 'https://') then 'https://'
    else if std.startsWith(v, 'http://') then 'http://' else '';
    local rest = v[std.length(scheme):];
    local literal = std.strReplace(v, '%%', '');
    scheme != '' && std.length(rest) > 0 && rest[0] != '/' && rest[0] != '%'
    && std.all([
      std.codepoint(c) > 32 && std.codepoint(c) < 127 && !std.objectHas(urlForbidden, c)
      for c in std.stringChars(v)
    ])
    && std.length(std.findSubstr('%s', literal)) == 1
    && std.findSubstr('%', std.strReplace(literal, '%s', '')) == []
  );

local isWhole(v) = std.isNumber(v) && v == std.floor(v);

// Each `_config` key: whether a value is fine, and the rule a wrong one is told.
local checks = {
  topologyHintsExporterSelector: {
    ok: isMatchers,
    rule: 'must be PromQL label matchers (as between the braces of a selector), such as job="x", namespace=~"y" '
          + '(name, one of = != =~ !~, a double-quoted value; commas between)',
  },
  clusterLabel: {
    ok: isLabelName,
    rule: 'must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not beginning with __)',
  },
  showMultiCluster: { ok: std.isBoolean, rule: 'must be true or false' },
  runbookURLPattern: {
    ok: isRunbookPattern,
    rule: 'must be an http:// or https:// URL with %s (the alert name) once, no other % but %%, '
          + 'and no whitespace, control characters, quotes, <>, \\, ^, `, {, | or }',
  },
  overloadLimit: {
    ok: function(v) std.isNumber(v) && v > 1,
    rule: "must be a number above 1 (a zone's load factor; the engine's limit is 1.2)",
  },
  flapWindow: {
    ok: isDuration,
    rule: 'must be a Prometheus duration longer than zero, such as 1h or 1h30m (units y w d h m s ms, in that order)',
  },
  flapThreshold: {
    ok: function(v) isWhole(v) && v >= 2,
    rule: 'must be a whole number of at least 2 (a flap is a flip and back)',
  },
  istioZtunnelTraffic: { ok: std.isBoolean, rule: 'must be true or false' },
  linkerdTraffic: { ok: std.isBoolean, rule: 'must be true or false' },
  measuredCrossZoneMargin: {
    ok: function(v) std.isNumber(v) && v >= 0 && v < 1,
    rule: 'must be a number from 0 to below 1 (a difference of cross-zone shares)',
  },
  measuredMinBytesPerSecond: {
    ok: function(v) std.isNumber(v) && v >= 0,
    rule: 'must be a number of bytes per second, 0 or more',
  },
};

local problems(config) = [
  if std.objectHasAll(config, key) then
    '_config.%s %s, not %s' % [key, checks[key].rule, std.manifestJsonMinified(config[key])]
  else '_config.%s is missing' % key
  for key in std.objectFields(checks)
  if !std.objectHasAll(config, key) || !checks[key].ok(config[key])
];

local refusal(config) = 'topology-hints-exporter mixin: ' + std.join('; ', problems(config));

// On the three outputs, not on the mixin itself: jsonnet checks an object's asserts at each
// access of one of its fields, and the rules read `$._config` thousands of times.
{
  // The checked keys: tests/test_mixin_config.py sees that every `_config` key has a check.
  topologyHintsConfigChecks:: std.objectFields(checks),
  prometheusAlerts+:: { assert problems($._config) == [] : refusal($._config) },
  prometheusRules+:: { assert problems($._config) == [] : refusal($._config) },
  grafanaDashboards+:: { assert problems($._config) == [] : refusal($._config) },
}
