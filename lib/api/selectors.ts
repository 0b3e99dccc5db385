// Label and field selectors with the apiserver's grammar and semantics
// (k8s.io/apimachinery/pkg/labels and pkg/fields). Pure functions: the simulator evaluates them
// for list and watch, and the hub's offline cache evaluates them the same way.

export type LabelOperator = 'exists' | '!' | '=' | '==' | '!=' | 'in' | 'notin' | '>' | '<'

export interface LabelRequirement {
  key: string
  operator: LabelOperator
  values: string[]
}

export interface LabelSelector {
  /** all must hold (comma = AND); none means "everything" */
  requirements: LabelRequirement[]
}

export type FieldOperator = '=' | '==' | '!='

export interface FieldRequirement {
  field: string
  operator: FieldOperator
  value: string
}

export interface FieldSelector {
  requirements: FieldRequirement[]
}

// --- label selectors -------------------------------------------------------------------------

const nameRe = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/
const dnsSubdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const valueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/

function checkKey(key: string): void {
  const slash = key.indexOf('/')
  const prefix = slash === -1 ? '' : key.slice(0, slash)
  const name = slash === -1 ? key : key.slice(slash + 1)
  if (slash !== -1 && (prefix.length === 0 || prefix.length > 253 || !dnsSubdomainRe.test(prefix))) {
    throw new Error(`invalid label key "${key}": prefix part must be a lowercase RFC 1123 subdomain`)
  }
  if (name.length === 0 || name.length > 63 || !nameRe.test(name)) {
    throw new Error(
      `invalid label key "${key}": name part must consist of alphanumeric characters, '-', '_' or '.', ` +
        'and must start and end with an alphanumeric character (at most 63 characters)',
    )
  }
}

function checkValue(key: string, value: string): void {
  if (value.length > 63 || !valueRe.test(value)) {
    throw new Error(
      `invalid label value "${value}" for key "${key}": must be 63 characters or less and consist of ` +
        "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character",
    )
  }
}

type Token = { kind: 'id'; text: string } | { kind: 'op'; text: '!' | '=' | '==' | '!=' | '>' | '<' | '(' | ')' | ',' }

function tokenize(input: string): Token[] {
  const tokens: Token[] = []
  let i = 0
  while (i < input.length) {
    const c = input[i]
    if (/\s/.test(c)) {
      i++
      continue
    }
    const two = input.slice(i, i + 2)
    if (two === '==' || two === '!=') {
      tokens.push({ kind: 'op', text: two })
      i += 2
      continue
    }
    if ('!=><(),'.includes(c)) {
      tokens.push({ kind: 'op', text: c as '!' })
      i++
      continue
    }
    let j = i
    while (j < input.length && !/\s/.test(input[j]) && !'!=><(),'.includes(input[j])) j++
    tokens.push({ kind: 'id', text: input.slice(i, j) })
    i = j
  }
  return tokens
}

/** Parse `a=b,c!=d,e in (f,g),!h,i` into requirements. Throws an Error naming the problem. */
export function parseLabelSelector(input: string): LabelSelector {
  const tokens = tokenize(input)
  const requirements: LabelRequirement[] = []
  let pos = 0
  const peek = (): Token | undefined => tokens[pos]
  const fail = (what: string): never => {
    throw new Error(`unable to parse label selector "${input}": ${what}`)
  }
  if (tokens.length === 0) return { requirements }

  for (;;) {
    let t = peek()
    let negated = false
    if (t?.kind === 'op' && t.text === '!') {
      negated = true
      pos++
      t = peek()
    }
    if (!t || t.kind !== 'id') fail(`expected a label key${t ? `, found '${t.text}'` : ' at the end'}`)
    const key = (t as Token).text
    checkKey(key)
    pos++
    const next = peek()
    if (negated) {
      requirements.push({ key, operator: '!', values: [] })
    } else if (!next || (next.kind === 'op' && next.text === ',')) {
      requirements.push({ key, operator: 'exists', values: [] })
    } else if (next.kind === 'op' && (next.text === '=' || next.text === '==' || next.text === '!=')) {
      pos++
      const v = peek()
      let value = ''
      if (v && v.kind === 'id') {
        value = v.text
        pos++
      } else if (v && !(v.kind === 'op' && v.text === ',')) {
        fail(`expected a value after '${next.text}', found '${v.text}'`)
      }
      checkValue(key, value)
      requirements.push({ key, operator: next.text, values: [value] })
    } else if (next.kind === 'op' && (next.text === '>' || next.text === '<')) {
      pos++
      const v = peek()
      if (!v || v.kind !== 'id' || !/^-?\d+$/.test(v.text)) fail(`'${next.text}' needs an integer value`)
      pos++
      requirements.push({ key, operator: next.text, values: [(v as Token).text] })
    } else if (next.kind === 'id' && (next.text === 'in' || next.text === 'notin')) {
      pos++
      const open = peek()
      if (!open || open.kind !== 'op' || open.text !== '(') fail(`expected '(' after '${next.text}'`)
      pos++
      const values: string[] = []
      let expectValue = true
      for (;;) {
        const v = peek()
        if (!v) fail(`missing ')' in the values of '${key}'`)
        pos++
        if (v!.kind === 'op' && v!.text === ')') {
          if (expectValue && values.length > 0) values.push('')
          break
        }
        if (v!.kind === 'op' && v!.text === ',') {
          if (expectValue) values.push('')
          expectValue = true
          continue
        }
        if (v!.kind !== 'id' || !expectValue) fail(`unexpected '${v!.text}' in the values of '${key}'`)
        values.push(v!.text)
        expectValue = false
      }
      if (values.length === 0) fail(`for 'in', 'notin' operators, values set can't be empty`)
      for (const value of values) checkValue(key, value)
      requirements.push({ key, operator: next.text, values })
    } else {
      fail(`unexpected '${next.text}' after key '${key}'`)
    }
    const sep = peek()
    if (!sep) break
    if (sep.kind !== 'op' || sep.text !== ',') fail(`expected ',' between requirements, found '${sep.text}'`)
    pos++
    if (!peek()) fail('trailing comma')
  }
  return { requirements }
}

export function matchesLabels(selector: LabelSelector, labels: Record<string, string> | undefined | null): boolean {
  const set = labels ?? {}
  for (const r of selector.requirements) {
    const has = Object.prototype.hasOwnProperty.call(set, r.key)
    const value = has ? String(set[r.key]) : undefined
    switch (r.operator) {
      case 'exists':
        if (!has) return false
        break
      case '!':
        if (has) return false
        break
      case '=':
      case '==':
      case 'in':
        if (!has || !r.values.includes(value!)) return false
        break
      case '!=':
      case 'notin':
        if (has && r.values.includes(value!)) return false
        break
      case '>':
      case '<': {
        if (!has || !/^-?\d+$/.test(value!)) return false
        const n = Number(value)
        const limit = Number(r.values[0])
        if (r.operator === '>' ? !(n > limit) : !(n < limit)) return false
        break
      }
    }
  }
  return true
}

// --- field selectors -------------------------------------------------------------------------

function unescapeFieldValue(raw: string, input: string): string {
  let out = ''
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]
    if (c !== '\\') {
      out += c
      continue
    }
    const n = raw[i + 1]
    if (n === undefined || !'\\,=!'.includes(n)) {
      throw new Error(`invalid field selector "${input}": invalid escape sequence in "${raw}"`)
    }
    out += n
    i++
  }
  return out
}

/** Parse `metadata.name=x,spec.nodeName!=y` (`\,` `\=` `\!` `\\` escape inside values). */
export function parseFieldSelector(input: string): FieldSelector {
  const requirements: FieldRequirement[] = []
  if (input.trim() === '') return { requirements }
  const terms: string[] = []
  let current = ''
  for (let i = 0; i < input.length; i++) {
    const c = input[i]
    if (c === '\\' && i + 1 < input.length) {
      current += c + input[i + 1]
      i++
    } else if (c === ',') {
      terms.push(current)
      current = ''
    } else {
      current += c
    }
  }
  terms.push(current)
  for (const term of terms) {
    if (term === '') continue // the apiserver skips empty terms: `a=b,` is `a=b`
    let found: { at: number; op: FieldOperator } | undefined
    for (let i = 0; i < term.length && !found; i++) {
      if (term[i] === '\\') {
        i++
        continue
      }
      for (const op of ['!=', '==', '='] as const) {
        if (term.startsWith(op, i)) {
          found = { at: i, op }
          break
        }
      }
    }
    if (!found) throw new Error(`invalid field selector "${input}": '${term}' has no operator (=, == or !=)`)
    const field = term.slice(0, found.at).trim()
    if (field === '' || /[\s\\]/.test(field)) throw new Error(`invalid field selector "${input}": bad field name in '${term}'`)
    const value = unescapeFieldValue(term.slice(found.at + found.op.length), input)
    requirements.push({ field, operator: found.op, value })
  }
  return { requirements }
}

/** The string the apiserver compares for a field path: missing is "", booleans and numbers as text. */
export function fieldValue(obj: unknown, path: string): string {
  let cur: any = obj
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return ''
    cur = cur[part]
  }
  if (cur === undefined || cur === null) return ''
  if (typeof cur === 'object') return JSON.stringify(cur)
  return String(cur)
}

export function matchesFields(selector: FieldSelector, obj: unknown): boolean {
  for (const r of selector.requirements) {
    const v = fieldValue(obj, r.field)
    if (r.operator === '!=' ? v === r.value : v !== r.value) return false
  }
  return true
}

export function isEmptySelector(selector: LabelSelector | FieldSelector): boolean {
  return selector.requirements.length === 0
}
