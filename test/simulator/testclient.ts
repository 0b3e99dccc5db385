// Small HTTP helpers for the simulator's own tests: one-shot requests with raw headers and body,
// and watches read event by event (waiting for events, never sleeping).

import http from 'node:http'
import https from 'node:https'
import { gunzipSync } from 'node:zlib'

export interface Reply {
  status: number
  headers: http.IncomingHttpHeaders
  /** the body as sent (maybe gzip) */
  raw: Buffer
  /** the body decoded (gunzipped when Content-Encoding: gzip) */
  text: string
  json: any
}

export interface RequestOptions {
  method?: string
  headers?: Record<string, string>
  /** a string or Buffer is sent as is, anything else as JSON */
  body?: unknown
  /** https options (ca, cert, key) */
  tls?: https.RequestOptions
  timeoutMs?: number
}

export function request(url: string, opts: RequestOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const u = new URL(url)
    const body = opts.body === undefined ? undefined : typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body)
    const headers: Record<string, string> = { ...(opts.headers ?? {}) }
    if (body !== undefined && !Object.keys(headers).some(h => h.toLowerCase() === 'content-type')) headers['Content-Type'] = 'application/json'
    const mod = u.protocol === 'https:' ? https : http
    const req = mod.request(u, { method: opts.method ?? 'GET', headers, agent: false, ...(opts.tls ?? {}) }, res => {
      const chunks: Buffer[] = []
      res.on('data', c => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => {
        const raw = Buffer.concat(chunks)
        const decoded = res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw
        const text = decoded.toString('utf8')
        let json: any
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, raw, text, json })
      })
    })
    req.on('error', reject)
    if (opts.timeoutMs) req.setTimeout(opts.timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })))
    req.end(body)
  })
}

export interface Watch {
  status: number
  headers: http.IncomingHttpHeaders
  /** the next event; rejects after timeoutMs, or when the stream ended first */
  next(timeoutMs?: number): Promise<any>
  /** 'end' for a clean end of the stream, 'error' when it was cut */
  ended: Promise<'end' | 'error'>
  /** events received and not consumed yet */
  pending(): number
  close(): void
}

/** Open a watch; resolves as soon as the response headers arrive. */
export function watch(url: string, headers: Record<string, string> = {}, tls?: https.RequestOptions): Promise<Watch> {
  return new Promise((resolve, reject) => {
    const u = new URL(url)
    const mod = u.protocol === 'https:' ? https : http
    const req = mod.request(u, { headers, agent: false, ...(tls ?? {}) }, res => {
      const queue: any[] = []
      const waiters: { resolve: (v: any) => void; reject: (e: Error) => void }[] = []
      let buffer = ''
      let done: 'end' | 'error' | undefined
      let settle!: (v: 'end' | 'error') => void
      const ended = new Promise<'end' | 'error'>(r => (settle = r))
      const finish = (how: 'end' | 'error') => {
        if (done) return
        done = how
        settle(how)
        for (const w of waiters.splice(0)) w.reject(new Error(`watch ended (${how})`))
      }
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        buffer += chunk
        let nl: number
        while ((nl = buffer.indexOf('\n')) !== -1) {
          const line = buffer.slice(0, nl)
          buffer = buffer.slice(nl + 1)
          if (line.trim() === '') continue
          const event = JSON.parse(line)
          const w = waiters.shift()
          if (w) w.resolve(event)
          else queue.push(event)
        }
      })
      res.on('end', () => finish('end'))
      res.on('error', () => finish('error'))
      res.on('close', () => finish(res.complete ? 'end' : 'error'))
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        ended,
        pending: () => queue.length,
        next(timeoutMs = 5000) {
          if (queue.length > 0) return Promise.resolve(queue.shift())
          if (done) return Promise.reject(new Error(`watch ended (${done})`))
          return new Promise((res2, rej2) => {
            const timer = setTimeout(() => {
              const i = waiters.indexOf(w)
              if (i !== -1) waiters.splice(i, 1)
              rej2(new Error(`no watch event within ${timeoutMs} ms`))
            }, timeoutMs)
            const w = {
              resolve: (v: any) => {
                clearTimeout(timer)
                res2(v)
              },
              reject: (e: Error) => {
                clearTimeout(timer)
                rej2(e)
              },
            }
            waiters.push(w)
          })
        },
        close: () => req.destroy(),
      })
    })
    req.on('error', reject)
    req.end()
  })
}
